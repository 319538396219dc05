"""The one error type for bad input, so every front end (CLI, API, forms) can name the field."""

from __future__ import annotations

# An error echoes what it refuses ("got '...'"), and a key's name becomes its field: both cut here,
# once for every front end, so a megabyte of bad value never comes back in an answer or a log line.
MAX_FIELD_CHARS = 200
MAX_MESSAGE_CHARS = 1000


def cut(text: str, most: int) -> str:
    """`text`, or its first `most` - 1 characters and an ellipsis."""
    return text if len(text) <= most else text[: most - 1] + "\u2026"


class InvalidInput(ValueError):
    """Input that breaks the spec. `field` is the dotted path of the offending value; `param`, the
    analysis parameter it belongs to when it belongs to one (a form shows the error under that
    parameter's field without reading the path back)."""

    def __init__(self, field: str, message: str, *, param: str | None = None) -> None:
        field, message = cut(field, MAX_FIELD_CHARS), cut(message, MAX_MESSAGE_CHARS)
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.param = param

    def under(self, prefix: str) -> InvalidInput:
        """The same error with its field inside `prefix` (`params` + `count` -> `params.count`)."""
        return InvalidInput(f"{prefix}.{self.field}", self.message, param=self.param)

    def as_dict(self) -> dict[str, str]:
        return {"error": str(self), "field": self.field}


class Stalled(RuntimeError):
    """A policy left no launch at `position`: the request can never finish (rule-v1's bug)."""

    def __init__(self, position: int, policy: str) -> None:
        super().__init__(f"{policy} stalled at position {position}: no prefill candidate left")
        self.position = position
        self.policy = policy
