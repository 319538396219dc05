"""Why a boot failed, in errors that name the cause; torch-free, so the capture job (which runs
its boots in fresh processes) rebuilds a boot process's error as the same class."""

from __future__ import annotations


class BootFailed(RuntimeError):
    """A boot failed: its process's error (type, message, where), or its exit status and stderr."""


class BootOutOfMemory(BootFailed):
    """A shape ran out of device memory; the message names it, the memory asked for and the free."""


class AttentionBackendError(BootFailed):
    """The pinned attention kernel refused a step (or another kernel ran); the message names it."""


BY_NAME: dict[str, type[BootFailed]] = {c.__name__: c for c in (BootOutOfMemory, AttentionBackendError)}
