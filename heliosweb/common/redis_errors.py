"""Redis refusing writes, named for people: `MISCONF` (a failed snapshot, a full disk), `OOM`
(`maxmemory`), `READONLY` (a replica). Libraries wrap that reply (kombu's OperationalError, a
pipeline's prefix, a Lua script's error), so the cause chain is searched for it."""

from __future__ import annotations

from redis.exceptions import OutOfMemoryError, ReadOnlyError, ResponseError

_REFUSALS = {
    "MISCONF": "it cannot save to its disk (MISCONF: the disk is full or unwritable)",
    "OOM": "it is at its memory limit (OOM: maxmemory reached, nothing may be evicted)",
    "READONLY": "it is a read-only replica (READONLY)",
}


def redis_refusal(exc: BaseException | None) -> str | None:
    """`Redis refuses writes: <why>` when `exc` (or what caused it) is such a refusal, else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ResponseError):
            code = _code(exc)
            if code in _REFUSALS:
                return f"Redis refuses writes: {_REFUSALS[code]}"
        exc = exc.__cause__ or exc.__context__
    return None


def _code(exc: ResponseError) -> str:
    """Redis's error code. redis-py strips the codes it has a class for (`OOM`, `READONLY`) from the
    message; others (`MISCONF`) lead it, after a pipeline's "Command # 1 (...) caused error: "."""
    if isinstance(exc, OutOfMemoryError):
        return "OOM"
    if isinstance(exc, ReadOnlyError):
        return "READONLY"
    text = str(exc)
    # A script's refused write: "Error running script (...): @user_script:6: ... -MISCONF ...".
    in_script = next((code for code in _REFUSALS if f": -{code} " in text), None)
    return in_script or text.split("caused error: ", 1)[-1].split(" ", 1)[0]
