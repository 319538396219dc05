"""Explain a prompt: the `plan` command's answer for one request, drawn as chunk timelines.

The page's form names a catalog (the pull request's clean or drift catalog, a stored boot, a
job's catalog, or pasted JSON) and a request; this turns it into the exact JSON `python -m
scheduler_core plan` reads, answers it with the same code, and draws each policy's plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from heliosweb.catalogs.selectors import boot_catalogs
from heliosweb.common.bounds import parse_json
from heliosweb.jobs import selectors as job_selectors
from scheduler_core.analyses.catalogs import DRIFT_PARAM, EXECUTION_PARAMS, pr22_catalogs
from scheduler_core.analyses.params import AFFINE
from scheduler_core.catalog import Catalog
from scheduler_core.errors import InvalidInput
from scheduler_core.execution import parse_execution
from scheduler_core.plan_io import answer
from scheduler_core.policies import selectable_policies
from scheduler_core.validation import int_of_text

from .contract import Figure
from .timeline import TimelineRow, chunk_timeline

DEFAULT_EXECUTION = {p.name: p.default for p in EXECUTION_PARAMS}
MAX_DRAWN_LAUNCHES = 500  # per plan, on the timeline and in the page's table
PR22_CATALOGS = ("clean", "drift")


def graph_runs(launches: list[dict[str, Any]]) -> str:
    """The graphs a plan launches, a run of one size written once: "2048 x 6 · 1024 · 512"."""
    runs: list[list[int]] = []
    for launch in launches:
        if runs and runs[-1][0] == launch["graph"]:
            runs[-1][1] += 1
        else:
            runs.append([launch["graph"], 1])
    return " · ".join(f"{graph} x {n}" if n > 1 else str(graph) for graph, n in runs)


def _ints(text: str, field: str) -> list[int]:
    numbers = [int_of_text(x) for x in text.replace(",", " ").split()]
    if any(n is None for n in numbers):
        raise InvalidInput(field, f"must be whole numbers separated by commas, got {text[:80]!r}")
    return [n for n in numbers if n is not None]


def _spans(text: str) -> list[list[int]]:
    spans = []
    for i, item in enumerate(x.strip() for x in text.split(",") if x.strip()):
        parts = item.split("-")
        if len(parts) != 2:
            raise InvalidInput(f"atomic_spans[{i}]", f"must be start-end, got {item!r}")
        spans.append(_ints(" ".join(parts), f"atomic_spans[{i}]"))
    return spans


def request_of(query: Mapping[str, str]) -> dict[str, Any]:
    """The `request` object from the form's text fields."""
    tokens = _ints(query.get("prompt_tokens", "") or "", "prompt_tokens")
    if len(tokens) != 1:
        raise InvalidInput("prompt_tokens", "is required: one whole number")
    limit = (query.get("prefill_limit") or "").strip()
    return {
        "prompt_tokens": tokens[0],
        "message_boundaries": _ints(query.get("message_boundaries", "") or "", "message_boundaries"),
        "atomic_spans": _spans(query.get("atomic_spans", "") or ""),
        "prefill_limit": _ints(limit, "prefill_limit")[0] if limit else None,
    }


def _table(catalog: list[dict[str, Any]], first_token_ms: float) -> dict[str, Any]:
    """A measured catalog (stored, or pasted and parsed) as the true costs (a boot's own durations)."""
    return {"table": [g for g in catalog if g["ms"]], "first_token_ms": first_token_ms}


def catalog_of(query: Mapping[str, str]) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    """(catalog, execution, description) named by the form: `clean`/`drift` (with `job`, that
    job's execution model and drift factor), `boot` (a stored boot, `boot_id`), `job` (a job's
    own boot catalog) or `json` (pasted in `catalog_json`)."""
    choice = query.get("catalog") or "clean"
    job = job_selectors.job_get(job_id=query["job"]) if query.get("job") else None
    params = job.params if job is not None else {}
    if choice in PR22_CATALOGS:
        execution = {k: params.get(k, v) for k, v in DEFAULT_EXECUTION.items()}
        if params.get("execution", AFFINE) != AFFINE:  # a GPU profile: plan input names it
            execution = {"profile": params["execution"]}
        factor = params.get("drift_factor", DRIFT_PARAM.default)
        catalogs = pr22_catalogs(parse_execution(execution), factor)
        source = f"job #{job.pk}'s" if job is not None else "the pull request's"
        return catalogs[choice].to_dicts(), execution, f"{source} {choice} catalog (drift factor {factor})"
    first = params.get("first_token_ms", DEFAULT_EXECUTION["first_token_ms"])
    if choice == "boot":
        boot_id = _ints(query.get("boot_id") or "", "boot_id")
        [catalog] = boot_catalogs(ids=boot_id[:1], field="boot_id")
        return catalog, _table(catalog, first), f"stored boot #{boot_id[0]}"
    if choice in ("job", "boot_catalog"):
        stored = params.get("boot_catalog") or params.get("catalog")
        if job is None or not stored:
            raise InvalidInput("job", "names no job with a boot catalog")
        return stored, _table(stored, first), f"job #{job.pk}'s boot catalog"
    if choice == "json":
        pasted = parse_json(query.get("catalog_json") or "", "catalog_json")
        graphs = pasted["catalog"] if isinstance(pasted, dict) and "catalog" in pasted else pasted
        catalog = Catalog.from_dicts(graphs, "catalog_json").to_dicts()  # parsed here: its table reads every graph
        return catalog, _table(catalog, first), "a pasted catalog"
    raise InvalidInput("catalog", f"unknown choice {choice!r} (clean, drift, boot, job or json)")


def explain(query: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(plan input, its answer, the catalog's description) for the form's query."""
    catalog, execution, description = catalog_of(query)
    data: dict[str, Any] = {
        "policies": list(selectable_policies()),
        "catalog": catalog,
        "request": request_of(query),
        "execution": execution or None,
    }
    return data, answer(data), description


def graphs_text(plan: dict[str, Any]) -> str:
    """ "4096 x 3 · 512": a plan's graphs as the page lists them (`graph_runs`), the first
    MAX_DRAWN_LAUNCHES launches."""
    shown = plan.get("launches", [])[:MAX_DRAWN_LAUNCHES]
    more = plan.get("launch_count", 0) - len(shown)
    return graph_runs(shown) + (f" · … ({more:,} more)" if more > 0 else "")


def plans_figure(plans: list[dict[str, Any]], title: str) -> Figure:
    """Each policy's plan as a row of one chunk timeline (a stalled plan draws empty), its first
    MAX_DRAWN_LAUNCHES launches: a plan within the work bound may make 11,000 (1-token graphs), and
    drawing them all took 3 s, for bars no screen shows apart."""
    rows = [TimelineRow(p["policy"], p.get("launches", [])[:MAX_DRAWN_LAUNCHES]) for p in plans]
    most = max((len(p.get("launches", [])) for p in plans), default=0)
    if most > MAX_DRAWN_LAUNCHES:
        title = f"{title} (the first {MAX_DRAWN_LAUNCHES:,} of {most:,} launches)"
    return Figure("plans", title, chunk_timeline(rows, title=title))
