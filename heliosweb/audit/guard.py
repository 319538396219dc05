"""The database refuses UPDATE and DELETE of audit rows, yet `manage.py flush` and the test runner
keep working. PostgreSQL: row triggers, which `flush`'s TRUNCATE does not fire. SQLite: `flush` is
`DELETE FROM`, so the DELETE trigger asks `helios_audit_flushing()`, a function only Django's
connections define (true only inside this project's `flush`): any other client's DELETE fails
too. Going around this takes dropping the trigger, and the chain shows the gap.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db.backends.signals import connection_created
from django.dispatch import receiver

_flushing = False


@contextmanager
def flush_permitted() -> Iterator[None]:
    """Let this process's `flush` empty the audit table (and nothing else)."""
    global _flushing
    _flushing = True
    try:
        yield
    finally:
        _flushing = False


@receiver(connection_created)
def _define_sqlite_function(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_function("helios_audit_flushing", 0, lambda: int(_flushing))
