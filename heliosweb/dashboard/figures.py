"""Plotly figures as plain dicts (the page renders them with the locally served plotly.js)."""

from __future__ import annotations

from typing import Any


def pr22_compare_figure(jobs: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    data = []
    for label, result in jobs:
        arms = result.get("arms", [])
        for policy in ("cost", "rule"):
            data.append(
                {
                    "type": "bar",
                    "name": f"{label} {policy}",
                    "x": [f"{a['arm']} {a['catalog']}" for a in arms],
                    "y": [a[policy]["ttft_ms"] for a in arms],
                }
            )
    return {
        "data": data,
        "layout": {
            "title": {"text": "TTFT by job"},
            "barmode": "group",
            "yaxis": {"title": {"text": "TTFT (ms)"}},
            "height": 380,
        },
    }


def pr22_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The pull request's table: launches / TTFT per arm, catalog and policy."""
    return [
        {
            "arm": a["arm"],
            "catalog": a["catalog"],
            "prompt_tokens": a["prompt_tokens"],
            "cost": f"{a['cost']['launches']} / {a['cost']['ttft_ms']:.2f}",
            "rule": f"{a['rule']['launches']} / {a['rule']['ttft_ms']:.2f}",
            "delta": f"{a.get('delta_ms', a['rule']['ttft_ms'] - a['cost']['ttft_ms']):+.2f}",
        }
        for a in result.get("arms", [])
    ]
