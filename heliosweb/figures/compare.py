"""Compare jobs: figures of the same kind overlaid (a trace group per job, legend `#id`), jobs of
different kinds side by side."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from heliosweb.jobs.models import BenchmarkJob

from .contract import Figure
from .decimate import decimate_trace, on_log_x
from .registry import views_for
from .selectors import job_data


def _figures(job: BenchmarkJob) -> list[Figure]:
    views = views_for(job.kind)
    return views.figures(job_data(job, views))


DASHES = ("solid", "dash", "dot", "dashdot", "longdash")


def _relabelled(trace: go.BaseTraceType, job_id: int, index: int) -> dict[str, Any]:
    """A job's trace in an overlay: named and grouped by job. Lines keep their colour (policy,
    capacity) and take a dash per job; bars get their categories prefixed with the job, so jobs
    stand next to each other (a timeline's rows stack) instead of adding up or hiding each other."""
    data = trace.to_plotly_json()
    data["name"] = f"#{job_id} {data.get('name') or ''}".strip()
    data["legendgroup"] = f"#{job_id}"
    if data.get("type") == "bar" or data.get("mode") == "markers+text":
        axis = "y" if data.get("orientation") == "h" or data.get("type") == "scatter" else "x"
        data[axis] = [f"#{job_id} · {v}" for v in data.get(axis, [])]
    elif data.get("type") in ("scatter", "scattergl"):
        data["line"] = {**data.get("line", {}), "dash": DASHES[index % len(DASHES)]}
    return data


def overlay(figure_id: str, members: Sequence[tuple[int, Figure]]) -> Figure:
    """The members' traces on the first one's layout, each cut to the screen's resolution before it
    is added (`decimate`: two 19,000-request jobs' CDFs would otherwise be validated point by point)."""
    first = members[0][1]
    fig = go.Figure(layout=first.figure.layout)
    layout = first.figure.layout.to_plotly_json()
    for index, (job_id, member) in enumerate(members):
        for trace in member.figure.data:
            data = _relabelled(trace, job_id, index)
            decimate_trace(data, log=on_log_x(data, layout))
            fig.add_trace(data)
    if any(t.get("orientation") == "h" for t in fig.to_plotly_json()["data"]):
        rows = [y for t in fig.data if getattr(t, "orientation", None) == "h" for y in t.y]
        fig.update_yaxes(categoryarray=list(dict.fromkeys(rows))[::-1])
        fig.update_layout(height=140 + 46 * len(set(rows)))
    ids = ", ".join(f"#{job_id}" for job_id, _ in members)
    title = f"{first.title} ({ids})"
    fig.update_layout(title_text=f"{first.figure.layout.title.text or first.title} ({ids})")
    # each job's own text alternative, where its kind wrote one (else the overlay's is described)
    said = [f"#{job_id}: {member.summary}" for job_id, member in members if member.summary]
    return Figure(figure_id, title, fig, " ".join(said) or None)


def compare_figures(jobs: Sequence[BenchmarkJob]) -> list[Figure]:
    """One overlay per figure id for each kind with several jobs; a lone job's figures as they are."""
    by_kind: dict[str, list[tuple[int, list[Figure]]]] = {}
    for job in jobs:
        by_kind.setdefault(job.kind, []).append((job.pk, _figures(job)))
    out: list[Figure] = []
    for kind, members in by_kind.items():
        if len(members) == 1:
            job_id, figures = members[0]
            out += [Figure(f"{kind}-{job_id}-{f.id}", f"#{job_id} {f.title}", f.figure) for f in figures]
            continue
        ids = list(dict.fromkeys(f.id for _, figures in members for f in figures))
        for figure_id in ids:
            same = [(job_id, f) for job_id, figures in members for f in figures if f.id == figure_id]
            out.append(overlay(f"{kind}-{figure_id}", same))
    return out


SHOWN_CHARS = 80  # a catalog parameter is long: its start is shown, the whole stays in each job's parameters


def params_that_differ(params: Sequence[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The parameters whose values differ between the overlaid jobs, each with its value per job
    (JSON, cut to SHOWN_CHARS), in the first job's order: what a reader must know to read the overlay."""
    names = list(dict.fromkeys(name for p in params for name in p))
    differ = []
    for name in names:
        values = [json.dumps(p.get(name), sort_keys=True) for p in params]
        if len(set(values)) > 1:
            differ.append((name, [v if len(v) <= SHOWN_CHARS else v[: SHOWN_CHARS - 1] + "…" for v in values]))
    return differ
