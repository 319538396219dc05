"""Telemetry records and batches for tests, built from the one declaration (`helios_client.records`):
a field added there is a field these builders must be given here, or every telemetry test fails."""

from __future__ import annotations

import time
from dataclasses import fields, replace
from typing import Any

from helios_client.records import SCHEMA, Batch, LaunchRecord, RequestRecord

NOW_MS = time.time() * 1000
SESSION = "0b5e3f0c-6c1e-4c5e-9a55-4b1f2f0d7a11"
LAUNCH = LaunchRecord(
    t_ms=NOW_MS, request=0, graph=512, start=0, end=300, padded=212, chooser="rule", ms=5.5, policy="cost", version=1
)
FINISHED = RequestRecord(
    t_ms=NOW_MS,
    request=0,
    prompt_tokens=300,
    ttft_ms=12.0,
    itl_ms=[2.0, 2.5],
    launches=[512],
    policy="cost",
    version=1,
)


def _built(base: LaunchRecord | RequestRecord, i: int, over: dict[str, Any]) -> dict[str, Any]:
    """`base` with request `i` and the declared fields in `over` replaced; any other key in `over`
    (a typo, `type`) is put in the dict as it is, so tests can send what the declaration refuses."""
    declared = {"request": i} | {k: v for k, v in over.items() if k in {f.name for f in fields(base)}}
    return {**replace(base, **declared).to_dict(), **{k: v for k, v in over.items() if k not in declared}}


def launch(i: int = 0, **over: Any) -> dict[str, Any]:
    return _built(LAUNCH, i, over)


def finished(i: int = 0, **over: Any) -> dict[str, Any]:
    return _built(FINISHED, i, over)


def body(records: list[Any], batch: int = 1, engine: str = "eng-1", session: str = SESSION, **over: Any) -> dict:
    """A batch as an engine posts it."""
    return {**Batch(SCHEMA, engine, session, batch, records).to_dict(), **over}
