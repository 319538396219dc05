"""Writes a running job must not lose: retried with a backoff while the database refuses them
(a disk full for a second, a database restarting), and when they still fail, named by their
cause, so the job fails with it at once instead of ending `done` with events missing.

tenacity (pinned) does the retrying: exponential backoff with a deadline, a hook before each
sleep, the last error re-raised; the hand-written loop it replaces dropped the batch at once.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

log = logging.getLogger(__name__)
T = TypeVar("T")


class JobFailure(Exception):
    """Ends a running job as failed with `reason` (raised in the analysis at its next event, or
    found once it returns)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def failure_cause(exc: BaseException) -> str:
    """What an operator must fix, first: `disk full` or `database unavailable`, then the error."""
    text = str(exc).strip() or type(exc).__name__
    low = text.lower()
    if getattr(exc, "errno", None) == errno.ENOSPC or any(s in low for s in ("disk is full", "no space left")):
        return f"disk full ({text})"
    if isinstance(exc, (OperationalError, InterfaceError)):
        return f"database unavailable ({text})"
    return f"the database refused it ({text})"


def _reconnect(state: RetryCallState) -> None:
    """A broken connection is not reused: the next attempt opens a fresh one."""
    error = state.outcome.exception() if state.outcome is not None else None
    log.warning("database write failed (attempt %d), retrying: %s", state.attempt_number, error)
    if not connection.in_atomic_block:
        connection.close()


def stored(write: Callable[[], T], *, what: str, within: float | None = None) -> T:
    """`write()` (one transaction), retried while the database is unavailable (full, locked, gone)
    for up to `within` seconds (`HELIOS_STORE_RETRY_SECONDS` by default); then, or at once for an
    error a retry cannot mend (a constraint), JobFailure naming `what` and the cause."""
    retrying = Retrying(
        retry=retry_if_exception_type((OperationalError, InterfaceError)),
        wait=wait_exponential(multiplier=0.05, max=2.0),
        stop=stop_after_delay(settings.HELIOS_STORE_RETRY_SECONDS if within is None else within),
        before_sleep=_reconnect,
        reraise=True,
    )
    try:
        return retrying(write)
    except DatabaseError as exc:
        log.exception("%s could not be stored", what)
        raise JobFailure(f"{what} could not be stored: {failure_cause(exc)}") from exc
