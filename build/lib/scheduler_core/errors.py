"""The one error type for bad input, so every front end (CLI, API, forms) can name the field."""

from __future__ import annotations


class InvalidInput(ValueError):
    """Input that breaks the spec. `field` is the dotted path of the offending value; `param`, the
    analysis parameter it belongs to when it belongs to one (a form shows the error under that
    parameter's field without reading the path back)."""

    def __init__(self, field: str, message: str, *, param: str | None = None) -> None:
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
