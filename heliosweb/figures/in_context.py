"""/explain reached from a serving run (`?job=N&request=ID`, with `rate=R` for a capacity job's
table): the request's TTFT in that run, split into the plan's own cost, the request's own fixed
launches and the time it waited behind other work (`scheduler_core.in_context`), so the plan on the
page and the figure in the table that linked to it are read as parts of one sum."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from heliosweb.jobs import selectors as job_selectors
from scheduler_core import in_context
from scheduler_core.analyses import simulate
from scheduler_core.errors import InvalidInput
from scheduler_core.request import Request
from scheduler_core.saturation import QUEUEING
from scheduler_core.validation import int_of_text, number_of_text

from .selectors import job_pair


def request_context(query: Mapping[str, str], plans: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The split of the request's TTFT per policy and of the pair's delta; None unless the query
    names a job and a request. InvalidInput names the field when they do not fit together."""
    if not query.get("job") or not query.get("request"):
        return None
    job = job_selectors.job_get(job_id=query["job"])
    request_id = int_of_text(query["request"])
    if request_id is None:
        raise InvalidInput("request", f"must be a request id (a whole number), got {query['request'][:40]!r}")
    rate = number_of_text(query["rate"]) if query.get("rate") else None
    found = in_context.in_run(job.result or {}, request_id, rate)
    if found is None:
        where = f" at {rate:g} requests/s" if rate is not None else ""
        raise InvalidInput("request", f"job #{job.pk} ({job.kind}) holds no request {request_id}{where}")
    if str(found.prompt_tokens) != (query.get("prompt_tokens") or "").strip():  # the reader changed the prompt
        return {"job": job.pk, "request": request_id, "prompt_tokens": found.prompt_tokens, "prompt_differs": True}
    setting = {k: job.params[k] for k in (*simulate.SETTING, "boot_catalog") if k in (job.params or {})}
    params = simulate.ANALYSIS.validate(setting)
    execution, catalog, _, _ = simulate.setting(params)
    planned = {p["policy"]: p["ttft_ms"] for p in plans if p.get("ttft_ms") is not None}
    request = Request(found.prompt_tokens)
    alone = {
        name: in_context.alone_ttft_ms(request, found.output_tokens, name, catalog, execution, params["max_lanes"])
        for name in found.ttft_ms
        if name in planned
    }
    parts = in_context.splits(found.ttft_ms, planned, alone)
    pair = job_pair(job, query)  # the link's pair (after - before), else the job's first two policies
    return {
        "job": job.pk,
        "kind": job.kind,
        "request": request_id,
        "rate_per_s": rate,
        "prompt_tokens": found.prompt_tokens,
        "prompt_differs": False,
        "splits": [s.to_dict() for s in parts.values()],
        "delta": in_context.delta(parts[pair.after], parts[pair.before])
        if pair and pair.after in parts and pair.before in parts
        else None,
        "overloaded": _overloaded(job.result or {}, rate),
        "queueing": QUEUEING,
    }


def _overloaded(result: Mapping[str, Any], rate: float | None) -> bool:
    """Whether the run the request comes from was overloaded (any policy), as its result says."""
    if rate is None:
        return any((p.get("load") or {}).get("overloaded") for p in result.get("policies") or ())
    return any(
        pt.get("overloaded")
        for p in result.get("policies") or ()
        for pt in p.get("points", [])
        if pt["rate_per_s"] == rate
    )
