"""Web-side errors: scheduler_core's InvalidInput (names the field) plus a not-found flavour (404)."""

from scheduler_core.errors import InvalidInput


class NotFound(InvalidInput):
    """An unknown id or name: the API answers 404, naming the field."""
