"""Exports: a job's result tables as CSV, and launches (a job's, or an engine's from its telemetry)
as a Chrome trace (the JSON trace event format that Perfetto and chrome://tracing open)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from heliosweb.common.csv_cells import csv_cell
from heliosweb.common.errors import NotFound

from .contract import JobData, KindViews, Span

US_PER_MS = 1000.0


def table_names(job: JobData, views: KindViews) -> list[str]:
    return [name for name, rows in views.tables(job).items() if rows]


def table_csv(job: JobData, views: KindViews, name: str | None) -> tuple[str, str]:
    """(table name, CSV text with a header row): the named table, or the kind's first one. The name
    is one of the kind's own (an unknown one is NotFound), so the file name never carries user text;
    text cells go through `csv_cell`."""
    tables = {n: rows for n, rows in views.tables(job).items() if rows}
    if not tables:
        raise NotFound("table", f"a {job.kind} job has no result table (finished jobs of most kinds have one)")
    if name is None:
        name = next(iter(tables))
    if name not in tables:
        raise NotFound("table", f"no table {name!r} in a {job.kind} job (tables: {sorted(tables)})")
    rows = tables[name]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
    return name, out.getvalue()


def chrome_trace(job: JobData, views: KindViews) -> dict[str, Any]:
    """A job's launches (and a kind's other spans) as a Chrome trace (`trace_of`), with the kind's
    `trace_notes` as its `otherData` (what it holds, and where it was cut)."""
    if views.spans is None:
        raise NotFound("trace", f"a {job.kind} job records no launches to trace")
    spans = views.spans(job)
    if not spans:
        raise NotFound("trace", f"job {job.id} has no launches yet")
    trace = trace_of(spans)
    if views.trace_notes is not None:
        trace["otherData"] = views.trace_notes(job)
    return trace


def trace_of(spans: Iterable[Span]) -> dict[str, Any]:
    """Complete events (`ph: X`, µs) per launch, a process per `span.process`, a thread per
    `span.thread`, their names as metadata, and flow events linking the launches of one `flow`."""
    pids: dict[str, int] = {}
    tids: dict[tuple[str, str], int] = {}
    events: list[dict[str, Any]] = []
    flows: dict[tuple[str, int | str], list[dict[str, Any]]] = {}
    for span in spans:
        pid = pids.setdefault(span.process, len(pids) + 1)
        tid = tids.setdefault((span.process, span.thread), len(tids) + 1)
        event = {
            "name": span.name,
            "cat": span.category,
            "ph": "X",
            "ts": round(span.start_ms * US_PER_MS, 3),
            "dur": round(max(span.duration_ms, 0.0) * US_PER_MS, 3),
            "pid": pid,
            "tid": tid,
            "args": span.args,
        }
        events.append(event)
        if span.flow is not None:
            flows.setdefault((span.process, span.flow), []).append(event)
    meta = [_meta("process_name", pid, 0, name) for name, pid in pids.items()]
    meta += [_meta("thread_name", pids[process], tid, thread) for (process, thread), tid in tids.items()]
    return {"traceEvents": meta + events + _flow_events(flows), "displayTimeUnit": "ms"}


def _meta(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": {"name": name}}


def _flow_events(flows: dict[tuple[str, int | str], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """For each request with two launches or more: a flow start in its first, steps, an end in its last.

    A flow event binds to the slice with its `ts`, `pid`, `tid` and `cat` (Chrome DevTools' trace
    engine and Perfetto match all four), so each carries its launch's category."""
    out: list[dict[str, Any]] = []
    for flow_id, (_, chain) in enumerate(sorted(flows.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))), start=1):
        if len(chain) < 2:
            continue
        for i, launch in enumerate(chain):
            ph = "s" if i == 0 else "f" if i == len(chain) - 1 else "t"
            event = {
                "name": "request",
                "cat": launch["cat"],
                "ph": ph,
                "id": flow_id,
                "ts": launch["ts"],
                "pid": launch["pid"],
                "tid": launch["tid"],
            }
            if ph != "s":
                event["bp"] = "e"
            out.append(event)
    return out
