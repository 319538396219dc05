"""The one error type for bad input, so every front end (CLI, API, forms) can name the field."""

from __future__ import annotations


class InvalidInput(ValueError):
    """Input that breaks the spec. `field` is the dotted path of the offending value."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    def as_dict(self) -> dict[str, str]:
        return {"error": str(self), "field": self.field}


class Stalled(RuntimeError):
    """A policy left no launch at `position`: the request can never finish (rule-v1's bug)."""

    def __init__(self, position: int, policy: str) -> None:
        super().__init__(f"{policy} stalled at position {position}: no prefill candidate left")
        self.position = position
        self.policy = policy
