"""Compare jobs: figures of the same kind overlaid (a trace group per job, legend `#id`), jobs of
different kinds side by side.

Built from each job's `/figures/` answer as data (`selectors.figures_payload`: cut to the screen's
resolution, and a finished job's kept once built), never from its stored result again: two
19,500-request jobs compare without re-validating every point through Plotly's figure objects."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from heliosweb.jobs.models import BenchmarkJob

from .selectors import figures_payload

Json = dict[str, Any]
DASHES = ("solid", "dash", "dot", "dashdot", "longdash")
OPACITIES = (1.0, 0.5, 0.3)  # a filled shape's per job: a later job's rows show paler over the first's
PAYLOAD_KEYS = ("id", "title", "figure", "summary")  # what an embedding page reads of a figure


def _relabelled(trace: Json, job_id: int, index: int) -> Json:
    """A job's trace in an overlay: named and grouped by job. Lines keep their colour (policy,
    capacity) and take a dash per job, filled shapes an opacity per job; bars get their categories prefixed with the job, so jobs
    stand next to each other (a timeline's rows stack) instead of adding up or hiding each other."""
    data = dict(trace)
    data["name"] = f"#{job_id} {data.get('name') or ''}".strip()
    data["legendgroup"] = f"#{job_id}"
    if data.get("type") == "bar" or data.get("mode") == "markers+text":
        axis = "y" if data.get("orientation") == "h" or data.get("type") == "scatter" else "x"
        data[axis] = [f"#{job_id} · {v}" for v in data.get(axis) or []]
    elif data.get("fill") == "toself":
        data["opacity"] = OPACITIES[index % len(OPACITIES)]
    elif data.get("type", "scatter") in ("scatter", "scattergl"):
        data["line"] = {**(data.get("line") or {}), "dash": DASHES[index % len(DASHES)]}
    return data


def overlay(figure_id: str, members: Sequence[tuple[int, Json]]) -> Json:
    """One figure of the members' traces on the first one's layout; its summary each member's own."""
    first = members[0][1]
    layout = copy.deepcopy(first["figure"].get("layout") or {})
    data = [
        _relabelled(trace, job_id, index)
        for index, (job_id, member) in enumerate(members)
        for trace in member["figure"].get("data") or []
    ]
    rows = [y for t in data if t.get("orientation") == "h" for y in t.get("y") or []]
    if rows:
        layout["yaxis"] = {**(layout.get("yaxis") or {}), "categoryarray": list(dict.fromkeys(rows))[::-1]}
        layout["height"] = 140 + 46 * len(set(rows))
    ids = ", ".join(f"#{job_id}" for job_id, _ in members)
    stated = layout.get("title")
    title: Json = stated if isinstance(stated, dict) else {}
    layout["title"] = {**title, "text": f"{title.get('text') or first['title']} ({ids})"}
    said = " ".join(f"#{job_id}: {member['summary']}" for job_id, member in members if member.get("summary"))
    return {
        "id": figure_id,
        "title": f"{first['title']} ({ids})",
        "figure": {"data": data, "layout": layout},
        "summary": said,
    }


def compare_payload(jobs: Sequence[BenchmarkJob]) -> list[Json]:
    """One overlay per figure id for each kind with several jobs; a lone job's figures as they are."""
    by_kind: dict[str, list[tuple[int, list[Json]]]] = {}
    for job in jobs:
        by_kind.setdefault(job.kind, []).append((job.pk, figures_payload(job)))
    out: list[Json] = []
    for kind, members in by_kind.items():
        if len(members) == 1:
            job_id, figures = members[0]
            out += [
                {
                    **{k: f.get(k) for k in PAYLOAD_KEYS},
                    "id": f"{kind}-{job_id}-{f['id']}",
                    "title": f"#{job_id} {f['title']}",
                }
                for f in figures
            ]
            continue
        ids = list(dict.fromkeys(f["id"] for _, figures in members for f in figures))
        for figure_id in ids:
            same = [(job_id, f) for job_id, figures in members for f in figures if f["id"] == figure_id]
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
