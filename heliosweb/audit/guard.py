"""The database refuses UPDATE and DELETE of audit rows, yet `manage.py flush` and the test
runner (which flushes between transactional tests) keep working.

PostgreSQL: row triggers refuse UPDATE and DELETE; `flush` there is TRUNCATE, which row triggers
do not see. SQLite: `flush` is `DELETE FROM`, so the DELETE trigger asks the function
`helios_audit_flushing()`, which Django's connections define (false except inside this project's
`flush`). Any other client (the sqlite3 shell, a script) does not have the function, so its
DELETE fails too. Going around all this takes dropping the trigger, and the chain shows the gap.
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
