"""Web-side errors. All are scheduler_core's `InvalidInput` (they name a field), so every front end
reports them the same way; the flavour picks the HTTP status, in one place (`http_status`)."""

from __future__ import annotations

from scheduler_core.errors import InvalidInput


class NotFound(InvalidInput):
    """An unknown id or name (404)."""


class Forbidden(InvalidInput):
    """The actor may not take this step: a missing permission, or approving their own proposal (403)."""


class Conflict(InvalidInput):
    """Valid input, but not now: a wrong status, or the state changed since (409)."""


class TooLarge(InvalidInput):
    """A body over the size the server reads (413)."""


class Throttled(InvalidInput):
    """A limit on how much one user may ask for at once (429 with Retry-After, in seconds)."""

    def __init__(self, field: str, message: str, retry_after: int) -> None:
        super().__init__(field, message)
        self.retry_after = retry_after


def internal_error() -> dict[str, str]:
    """The body of every JSON 500: the cause stays in the server's log."""
    return {"error": "internal error (logged on the server)", "field": "server"}


def http_status(exc: InvalidInput) -> int:
    """The status a page or the API answers for `exc`; plain bad input is 400."""
    for flavour, status in ((NotFound, 404), (Forbidden, 403), (Conflict, 409), (TooLarge, 413), (Throttled, 429)):
        if isinstance(exc, flavour):
            return status
    return 400
