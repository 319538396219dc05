"""Decision errors. All are `InvalidInput` (they name a field), so every front end reports them the
same way; the flavour picks the HTTP status: 403 forbidden, 409 conflict with the current state."""

from scheduler_core.errors import InvalidInput


class Forbidden(InvalidInput):
    """The actor may not take this step (missing permission, or approving their own proposal)."""


class Conflict(InvalidInput):
    """The step is valid input but not now: wrong status, or the policy changed since the proposal."""
