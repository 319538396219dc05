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
from plotly.subplots import make_subplots

from .contract import Figure, JobData, KindViews, Span, Table, base_layout, empty
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
    fig = go.Figure(
        layout=base_layout(
            f"Lanes, {policy}: the first {len(launches)} launches", height=160 + 22 * len(lanes), barmode="overlay"
        )
    )
    for name in sorted(groups, key=_group_order):
        g = groups[name]
        kind = name.split()[0]
        colour = {"init": INIT_COLOUR, "decode": DECODE_COLOUR}.get(kind) or capacity_colour(int(name.split()[1]))
        marker: dict[str, Any] = {"color": colour, "line": {"color": "white", "width": 0.5}}
        if kind == "mixed":
            marker["pattern"] = {"shape": "x", "fgcolor": DECODE_COLOUR}
        fig.add_bar(
            name=name,
            orientation="h",
            y=g["y"],
            x=g["x"],
            base=g["base"],
            customdata=g["text"],
            hovertemplate=HOVER,
            marker=marker,
        )
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=[f"req {i}" for i in lanes][::-1])
    fig.update_xaxes(title_text="simulation clock (ms)")
    return fig


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
    ttft = go.Figure(layout=base_layout("TTFT per request (CDF)"))
    itl = go.Figure(layout=base_layout("Inter-token latency (CDF over every token gap)"))
    for p in policies:
        colour = policy_colour(p["policy"])
        values = sorted(r["ttft_ms"] for r in p["per_request"])
        ttft.add_scatter(
            name=p["policy"],
            x=values,
            y=[(i + 1) / len(values) for i in range(len(values))],
            mode="lines",
            line={"color": colour, "shape": "hv"},
        )
        quantiles = p.get("itl_quantiles_ms", [])
        itl.add_scatter(
            name=p["policy"],
            x=quantiles,
            y=[i / 100 for i in range(len(quantiles))],
            mode="lines",
            line={"color": colour, "shape": "hv"},
        )
    for fig, label in ((ttft, "TTFT (ms)"), (itl, "inter-token latency (ms)")):
        fig.update_xaxes(title_text=label, type="log")
        fig.update_yaxes(title_text="share of requests" if fig is ttft else "share of token gaps", range=[0, 1.02])
    counts = make_subplots(
        rows=1, cols=3, subplot_titles=("launches by kind", "padded prefill tokens", "padded decode rows")
    )
    names = [p["policy"] for p in policies]
    for kind in KINDS:
        counts.add_bar(
            name=kind,
            x=names,
            y=[p["launches"].get(kind, 0) for p in policies],
            marker_color=KIND_COLOURS[kind],
            row=1,
            col=1,
        )
    colours = [policy_colour(n) for n in names]
    for col, key in ((2, "padded_prefill_tokens"), (3, "padded_decode_rows")):
        counts.add_bar(
            name=key.replace("_", " "),
            x=names,
            y=[p[key] for p in policies],
            marker_color=colours,
            showlegend=False,
            row=1,
            col=col,
        )
    counts.update_layout(base_layout("Launches and padding per policy", barmode="stack"))
    out += [
        Figure("ttft-cdf", "TTFT CDF", ttft),
        Figure("itl-cdf", "Inter-token latency CDF", itl),
        Figure("launches-padding", "Launches and padding", counts),
    ]
    return out


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
