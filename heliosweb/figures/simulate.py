"""simulate: traffic through the multi-lane scheduler, per policy.

The lanes timeline shows a window: the first `launch_events` launches of each policy (the job's
`launch` events), at most WINDOW of them, so a page stays small whatever the job recorded. A row
per request: its init, prefill and mixed chunks coloured by capacity, each decode launch a grey
bar on every lane it carried. The distributions come from the result: TTFT per request (a CDF of
every request) and the inter-token latency CDF (101 quantiles), so the payload stays small for
any traffic size."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from .contract import LOG_AXIS, Figure, JobData, KindViews, Span, Table, base_layout, empty
from .palette import DECODE_COLOUR, INIT_COLOUR, KIND_COLOURS, capacity_colour, policy_colour

KINDS = ("init", "prefill", "mixed", "decode")
WINDOW = 200  # launches drawn per policy: each decode launch is a bar per lane it carries
HOVER = "<b>%{y}</b> %{customdata}<extra></extra>"


def launches_by_policy(job: JobData) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for event in job.events_of("launch"):
        out.setdefault(event["policy"], []).append(event)
    return out


def window(launches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return launches[:WINDOW]


def lanes_timeline(policy: str, launches: list[dict[str, Any]]) -> go.Figure:
    """Rows are requests; bars are what each launch did for that request."""
    groups: dict[str, dict[str, list[Any]]] = {}

    def add(name: str, lane: int, launch: dict[str, Any], text: str) -> None:
        group = groups.setdefault(name, {"y": [], "x": [], "base": [], "text": []})
        group["y"].append(f"req {lane}")
        group["x"].append(launch["end_ms"] - launch["start_ms"])
        group["base"].append(launch["start_ms"])
        group["text"].append(f"launch {launch['index']} · {text} · {launch['end_ms'] - launch['start_ms']:.3f} ms")

    for launch in launches:
        chunk = launch["chunk"]
        if launch["kind"] == "init":
            add("init", launch["lane"], launch, "init")
        elif chunk is not None:
            what = f"graph {chunk['graph']} tokens [{chunk['start']}, {chunk['end']}) by {chunk['chooser']}"
            if launch["kind"] == "mixed":
                what += f" + {launch['decode']} decode rows"
            add(f"{launch['kind']} {chunk['graph']}", launch["lane"], launch, what)
        for lane in launch["decode_lanes"]:
            add("decode", lane, launch, f"decode token ({launch['decode']}-row graph)")
    lanes = sorted({int(y.split()[1]) for g in groups.values() for y in g["y"]})
    traces = []
    for name in sorted(groups, key=_group_order):
        g = groups[name]
        kind = name.split()[0]
        colour = {"init": INIT_COLOUR, "decode": DECODE_COLOUR}.get(kind) or capacity_colour(int(name.split()[1]))
        marker: dict[str, Any] = {"color": colour, "line": {"color": "white", "width": 0.5}}
        if kind == "mixed":
            marker["pattern"] = {"shape": "x", "fgcolor": DECODE_COLOUR}
        traces.append(
            {
                "type": "bar",
                "name": name,
                "orientation": "h",
                "y": g["y"],
                "x": g["x"],
                "base": g["base"],
                "customdata": g["text"],
                "hovertemplate": HOVER,
                "marker": marker,
            }
        )
    layout = base_layout(
        f"Lanes, {policy}: the first {len(launches)} launches",
        height=160 + 22 * len(lanes),
        barmode="overlay",
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": [f"req {i}" for i in lanes][::-1]},
        xaxis={"title": {"text": "simulation clock (ms)"}},
    )
    return go.Figure(data=traces, layout=layout)


def _group_order(name: str) -> tuple[int, int]:
    parts = name.split()
    return KINDS.index(parts[0]), int(parts[1]) if len(parts) > 1 else 0


def figures(job: JobData) -> list[Figure]:
    out = [
        Figure(f"lanes-{policy}", f"Lanes timeline ({policy})", lanes_timeline(policy, window(launches)))
        for policy, launches in launches_by_policy(job).items()
    ]
    result = job.result
    if not result:
        return out or [empty("ttft-cdf", "TTFT CDF", "the distributions appear when the simulation finishes")]
    policies = result["policies"]
    out += [
        Figure("ttft-cdf", "TTFT CDF", ttft_cdf(policies)),
        Figure("itl-cdf", "Inter-token latency CDF", _itl_cdf(policies)),
        Figure("launches-padding", "Launches and padding", launches_padding(policies)),
    ]
    return out


# Figures are built from trace dicts in one go.Figure call: Plotly validates each trace once,
# where add_trace re-validates and copies the traces already added (quadratic in traces).


def _cdf_layout(title: str, x_title: str, y_title: str) -> go.Layout:
    return base_layout(
        title,
        xaxis={"title": {"text": x_title}, **LOG_AXIS},
        yaxis={"title": {"text": y_title}, "range": [0, 1.02]},
    )


def _cdf(name: str, x: list[float], y: list[float]) -> dict[str, Any]:
    line = {"color": policy_colour(name), "shape": "hv"}
    return {"type": "scatter", "name": name, "x": x, "y": y, "mode": "lines", "line": line}


def ttft_cdf(policies: list[dict[str, Any]]) -> go.Figure:
    traces = []
    for p in policies:
        values = sorted(r["ttft_ms"] for r in p["per_request"])
        traces.append(_cdf(p["policy"], values, [(i + 1) / len(values) for i in range(len(values))]))
    return go.Figure(traces, _cdf_layout("TTFT per request (CDF)", "TTFT (ms)", "share of requests"))


def _itl_cdf(policies: list[dict[str, Any]]) -> go.Figure:
    traces = []
    for p in policies:
        quantiles = p.get("itl_quantiles_ms", [])
        traces.append(_cdf(p["policy"], quantiles, [i / 100 for i in range(len(quantiles))]))
    layout = _cdf_layout(
        "Inter-token latency (CDF over every token gap)", "inter-token latency (ms)", "share of token gaps"
    )
    return go.Figure(traces, layout)


PANELS = ("launches by kind", "padded prefill tokens", "padded decode rows")


def launches_padding(policies: list[dict[str, Any]]) -> go.Figure:
    """Three bar panels side by side (axes laid out here: make_subplots costs ~100 ms a figure)."""
    names = [p["policy"] for p in policies]
    traces: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": kind,
            "x": names,
            "y": [p["launches"].get(kind, 0) for p in policies],
            "marker": {"color": KIND_COLOURS[kind]},
        }
        for kind in KINDS
    ]
    colours = [policy_colour(n) for n in names]
    for axis, key in ((2, "padded_prefill_tokens"), (3, "padded_decode_rows")):
        traces.append(
            {
                "type": "bar",
                "name": key.replace("_", " "),
                "x": names,
                "y": [p[key] for p in policies],
                "marker": {"color": colours},
                "showlegend": False,
                "xaxis": f"x{axis}",
                "yaxis": f"y{axis}",
            }
        )
    gap, width = 0.2 / len(PANELS), (1 - 0.2 / len(PANELS) * (len(PANELS) - 1)) / len(PANELS)
    axes: dict[str, Any] = {}
    titles = []
    for i, title in enumerate(PANELS):
        suffix = "" if i == 0 else str(i + 1)
        left = i * (width + gap)
        axes[f"xaxis{suffix}"] = {"domain": [left, left + width], "anchor": f"y{suffix}"}
        axes[f"yaxis{suffix}"] = {"domain": [0, 1], "anchor": f"x{suffix}"}
        titles.append(
            {
                "text": title,
                "x": left + width / 2,
                "y": 1,
                "xref": "paper",
                "yref": "paper",
                "xanchor": "center",
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 16},
            }
        )
    layout = base_layout("Launches and padding per policy", barmode="stack", annotations=titles, **axes)
    return go.Figure(traces, layout)


def tables(job: JobData) -> dict[str, Table]:
    policies = (job.result or {}).get("policies", [])
    summary = [
        {
            "policy": p["policy"],
            "stalled": p["stalled"] is not None,
            "finished": p["finished"],
            **{f"ttft_{k}_ms": v for k, v in p["ttft_ms"].items()},
            **{f"itl_{k}_ms": v for k, v in p["itl_ms"].items()},
            **{f"launches_{k}": v for k, v in p["launches"].items()},
            "padded_prefill_tokens": p["padded_prefill_tokens"],
            "padded_prefill_ms": p.get("padded_prefill_ms"),  # absent from results older than it
            "padded_decode_rows": p["padded_decode_rows"],
            "end_ms": p["end_ms"],
        }
        for p in policies
    ]
    requests = [{"policy": p["policy"], **r} for p in policies for r in p["per_request"]]
    return {"policies": summary, "requests": requests}


def spans(job: JobData) -> list[Span]:
    """A process per policy, a thread per lane; decode launches on a `decode` thread; a request's
    init and chunks linked by a flow (its id)."""
    out = []
    for policy, launches in launches_by_policy(job).items():
        for launch in launches:
            chunk = launch["chunk"]
            args: dict[str, Any] = {
                "kind": launch["kind"],
                "graph": [launch["prefill"], launch["decode"]],
                "predicted_ms": launch["predicted_ms"],
                "true_ms": round(launch["end_ms"] - launch["start_ms"], 6),
                "decode_lanes": launch["decode_lanes"],
            }
            if chunk is not None:
                args.update(
                    tokens=[chunk["start"], chunk["end"]],
                    padding=chunk["graph"] - (chunk["end"] - chunk["start"]),
                    chooser=chunk["chooser"],
                )
            lane = launch["lane"]
            out.append(
                Span(
                    policy,
                    "decode" if lane is None else f"req {lane}",
                    launch["kind"] if chunk is None else f"{launch['kind']} {chunk['graph']}",
                    launch["start_ms"],
                    launch["end_ms"] - launch["start_ms"],
                    args,
                    flow=lane,
                )
            )
    return out


VIEWS = KindViews(figures, event_types=("launch",), tables=tables, spans=spans)
