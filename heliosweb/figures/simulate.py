"""simulate: traffic through the multi-lane scheduler, per policy.

The requests timeline shows the requests of a policy (from the result): a row per request, from its
arrival to its first token and on to its last; past REQUEST_ROWS (a row of about 2 px in the plot
area's 294: more would overlap, and each costs the browser's main thread) one request in every few
by arrival, spread over the whole run, the title says so. The lanes timeline zooms into a window: the first `launch_events` launches of each
policy (the job's `launch` events), at most WINDOW of them, so a page stays small whatever the job
recorded. A row per request there too: its init, prefill and mixed chunks coloured by capacity,
each decode launch a grey bar on every lane it carried. The distributions come from the result:
TTFT per request (a CDF of every request) and the inter-token latency CDF (101 quantiles), so the
payload stays small for any traffic size."""

from __future__ import annotations

import heapq
import math
from typing import Any

import plotly.graph_objects as go

from scheduler_core import saturation
from scheduler_core.analyses.simulate import SimulateResult
from scheduler_core.comparison import request_deltas
from scheduler_core.deltas import DIFFERENCE_OF_PERCENTILES, PERCENTILE_OF_DIFFERENCES, column

from .contract import LOG_AXIS, Figure, JobData, KindViews, Span, Table, base_layout, empty, many_points
from .palette import DECODE_COLOUR, INIT_COLOUR, KIND_COLOURS, capacity_colour, policy_colour

KINDS = ("init", "prefill", "mixed", "decode")
WINDOW = 200  # launches drawn per policy: each decode launch is a bar per lane it carries
PLOT_PX = 294  # the requests timeline's plot area: its 420 px less the house margins (76 above, 50 below)
# Requests drawn per policy in the requests timeline: a row of at least 2 px. 5,000 rows took 2-5 s
# of a browser's main thread to draw on a loaded host, 250 up to 258 ms.
REQUEST_ROWS = PLOT_PX // 2
ROW_HEIGHT = 0.8  # a bar's height, in rows: a thin gap between rows...
MIN_BAR_PX = 3.0  # ...but at least this thick, overlapping its neighbours
HOVER = "<b>%{y}</b> %{customdata}<extra></extra>"


def finished_policies(job: JobData) -> list[dict[str, Any]]:
    """Each policy's summary, the result read as its declared `SimulateResult`; none before it finishes."""
    return job.result_as(SimulateResult)["policies"] if job.result else []


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
        f"Lanes, {policy}: the first {len(launches)} launches ({_requests_named(lanes)})",
        height=160 + 22 * len(lanes),
        barmode="overlay",
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": [f"req {i}" for i in lanes][::-1]},
        xaxis={"title": {"text": "simulation clock (ms)"}},
    )
    return many_points(traces, layout)


def _lanes_summary(launches: list[dict[str, Any]]) -> str:
    """What the window holds: its launches (chunks and decode steps), when, for which requests."""
    lanes = sorted({launch["lane"] for launch in launches if launch["lane"] is not None})
    chunks = sum(1 for launch in launches if launch["chunk"] is not None)
    decodes = sum(1 for launch in launches if launch["kind"] == "decode")
    if not launches:
        return "No launch recorded."
    return (
        f"{len(launches)} launches from {min(x['start_ms'] for x in launches):.1f} to "
        f"{max(x['end_ms'] for x in launches):.1f} ms on the "
        f"simulation clock for {_requests_named(lanes)}: {chunks} prefill or mixed chunks and {decodes} decode "
        "launches, a row per request."
    )


def _requests_named(ids: list[int]) -> str:
    if not ids:
        return "no request"
    if ids == list(range(ids[0], ids[-1] + 1)):
        return f"request {ids[0]}" if len(ids) == 1 else f"requests {ids[0]}-{ids[-1]}"
    return f"{len(ids)} requests"


def requests_timeline(policy: str, per_request: list[dict[str, Any]]) -> Figure:
    """Every request (past REQUEST_ROWS, one in every `step` by arrival) as a row: a bar from its
    arrival to its first token, then a grey one to its last token. Each part is one filled shape
    of thin rectangles (`_row_bars`): Plotly draws a line trace broken by gaps as an SVG path per
    segment, 500 paths for 250 rows, and a fill as one path, whatever the rows."""
    step = max(1, math.ceil(len(per_request) / REQUEST_ROWS))
    rows = sorted(per_request, key=lambda r: r["arrival_ms"])[::step]
    waiting: list[tuple[float, float, int, str]] = []
    decoding: list[tuple[float, float, int, str]] = []
    for r in rows:
        first = r["arrival_ms"] + r["ttft_ms"]
        text = (
            f"request {r['id']}: {r['prompt_tokens']} prompt tokens in {r['prefill_launches']} launches, "
            f"TTFT {r['ttft_ms']:.1f} ms, {r['output_tokens']} tokens by {r['finish_ms']:.1f} ms"
        )
        waiting.append((r["arrival_ms"], first, r["id"], text))
        decoding.append((first, r["finish_ms"], r["id"], text))
    traces = [
        {
            "type": "scatter",
            "name": name,
            **_row_bars(bars, step * max(ROW_HEIGHT, MIN_BAR_PX * len(rows) / PLOT_PX) / 2),
            "mode": "none",
            "fill": "toself",
            "fillcolor": colour,
            "hoveron": "points",
            "hovertemplate": "%{customdata}<extra></extra>",
        }
        for name, bars, colour in (
            ("arrival to first token", waiting, policy_colour(policy)),
            ("first to last token", decoding, DECODE_COLOUR),
        )
    ]
    cut = f", one in {step} of {len(per_request)} by arrival ({len(rows)} rows)" if step > 1 else ""
    title = f"Requests, {policy}: all {len(rows)} requests{cut}" if not cut else f"Requests, {policy}{cut}"
    layout = base_layout(
        title,
        height=420,
        xaxis={"title": {"text": "simulation clock (ms)"}},
        yaxis={"title": {"text": "request"}, "autorange": "reversed", "zeroline": False},
    )
    ttft = sorted(r["ttft_ms"] for r in rows)
    summary = (
        f"{len(rows)} of {len(per_request)} requests under {policy}, a row each from arrival to first token "
        f"and on to the last token; TTFT median {ttft[len(ttft) // 2]:.1f} ms, longest {ttft[-1]:.1f} ms; "
        f"the last request finished at {max(r['finish_ms'] for r in rows):.1f} ms."
        if rows
        else f"No request finished under {policy}."
    )
    return Figure(f"requests-{policy}", f"Requests timeline ({policy})", many_points(traces, layout), summary)


def _row_bars(bars: list[tuple[float, float, int, str]], half: float) -> dict[str, list[Any]]:
    """Rectangles (x0 to x1, `half` above and below row y) as one shape's points, None between
    them, each corner hovering with its row's text."""
    x: list[Any] = []
    y: list[Any] = []
    customdata: list[Any] = []
    for x0, x1, row, text in bars:
        x += [x0, x1, x1, x0, None]
        y += [row - half, row - half, row + half, row + half, None]
        customdata += [text] * 4 + [None]
    return {"x": x, "y": y, "customdata": customdata}


def _group_order(name: str) -> tuple[int, int]:
    parts = name.split()
    return KINDS.index(parts[0]), int(parts[1]) if len(parts) > 1 else 0


def figures(job: JobData) -> list[Figure]:
    out = [
        Figure(
            f"lanes-{policy}",
            f"Lanes timeline ({policy})",
            lanes_timeline(policy, window(launches)),
            _lanes_summary(window(launches)),
        )
        for policy, launches in launches_by_policy(job).items()
    ]
    if not job.result:
        return out or [empty("ttft-cdf", "TTFT CDF", "the distributions appear when the simulation finishes")]
    policies = finished_policies(job)
    out = [requests_timeline(p["policy"], p["per_request"]) for p in policies] + out
    out += [
        Figure("ttft-cdf", "TTFT CDF", ttft_cdf(policies), load_summary(policies)),
        Figure("itl-cdf", "Inter-token latency CDF", _itl_cdf(policies)),
        Figure("launches-padding", "Launches and padding", launches_padding(policies)),
    ]
    return out + deltas_figures(pair_deltas(job))


def pair_deltas(job: JobData) -> dict[str, Any] | None:
    """The pair the reader picked (`JobData.compared`), the same request under both: simulate's and
    replay's per-request rows compared (`comparison.request_deltas`), None when it compares nothing."""
    deltas = request_deltas(finished_policies(job), job.compared()) if job.result else None
    return deltas if deltas and deltas["requests"] else None


def deltas_figures(deltas: dict[str, Any] | None) -> list[Figure]:
    """after - before TTFT per request as a CDF (the same request under both), for the pair compared."""
    if deltas is None:
        return []
    cdf, label = deltas["cdf_ms"], deltas["label"]
    trace = {
        "type": "scatter",
        "name": label,
        "x": cdf,
        "y": [q / (len(cdf) - 1) for q in range(len(cdf))],
        "mode": "lines",
        "line": {"color": "#374151", "shape": "hv"},
    }
    layout = base_layout(
        f"{label} TTFT per request ({PERCENTILE_OF_DIFFERENCES}: the same request under both)"
        + (f"; overloaded: {saturation.QUEUEING}" if deltas.get("queueing") else ""),
        xaxis={"title": {"text": f"{label} TTFT (ms)"}, "zeroline": True},
        yaxis={"title": {"text": "share of requests"}, "range": [0, 1]},
    )
    return [Figure("deltas", f"{label} per request", go.Figure([trace], layout))]


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


def overloaded(policies: list[dict[str, Any]]) -> list[str]:
    """The policies whose run was overloaded (`saturation`); none in results older than the verdict."""
    return [p["policy"] for p in policies if (p.get("load") or {}).get("overloaded")]


def load_summary(policies: list[dict[str, Any]]) -> str | None:
    """Each policy's load verdict, for the TTFT figure's text; None for results older than it."""
    said = [f"{p['policy']}: {saturation.Load(**p['load']).describe()}" for p in policies if p.get("load")]
    return "; ".join(said) + "." if said else None


def ttft_cdf(policies: list[dict[str, Any]]) -> go.Figure:
    traces = []
    for p in policies:
        values = sorted(r["ttft_ms"] for r in p["per_request"])
        name = p["policy"] + (" (overloaded)" if p["policy"] in overloaded(policies) else "")
        trace = _cdf(p["policy"], values, [(i + 1) / len(values) for i in range(len(values))])
        traces.append({**trace, "name": name})
    title = "TTFT per request (CDF)"
    if overloaded(policies):
        title += f"; OVERLOADED ({', '.join(overloaded(policies))}): {saturation.QUEUEING}"
    return many_points(traces, _cdf_layout(title, "TTFT (ms)", "share of requests"))


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
    policies = finished_policies(job)
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
            **{f"load_{k}": v for k, v in (p.get("load") or {}).items()},
        }
        for p in policies
    ]
    requests = [{"policy": p["policy"], **r} for p in policies for r in p["per_request"]]
    deltas = pair_deltas(job)
    worst = (deltas or {}).get("worst", [])
    return {"policies": summary, "deltas": delta_rows(deltas), "worst": worst, "requests": requests}


def delta_rows(d: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The compared pair's after - before TTFT (`pair_deltas`), both deltas, a row each, named by
    what it is (simulate's and replay's)."""
    if d is None:
        return []
    rows = [{"delta": column(PERCENTILE_OF_DIFFERENCES), **{q: d[q] for q in ("p50", "p90", "p99")}}]
    other = d["difference_of_percentiles"]
    rows.append({"delta": column(DIFFERENCE_OF_PERCENTILES), **{q: other[q] for q in ("p50", "p90", "p99")}})
    return [{"before": d["before"], "after": d["after"], **row, "overloaded_queueing": d["queueing"]} for row in rows]


TRACE_REQUESTS = 10_000  # request slices per policy in the Chrome trace (two events each; ~4 MB at the cap)


def spans(job: JobData) -> list[Span]:
    """A process per policy: every request (from the result, at most TRACE_REQUESTS) as a slice
    from arrival to its last token, with its wait for the first token inside it, on `requests`
    threads (a request takes the first thread free at its arrival); and the recorded launches (the
    first `launch_events`), a thread per lane, decode launches on a `decode` thread, a request's init
    and chunks linked by a flow (its id)."""
    out = [span for p in finished_policies(job) for span in _request_spans(p)]
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


def _request_spans(policy: dict[str, Any]) -> list[Span]:
    rows = sorted(policy["per_request"], key=lambda r: (r["arrival_ms"], r["id"]))[:TRACE_REQUESTS]
    busy: list[tuple[float, int]] = []  # (finish, thread) of the requests in flight
    free: list[int] = []  # threads free again, lowest first
    threads = 0
    out = []
    for r in rows:
        while busy and busy[0][0] <= r["arrival_ms"]:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            thread = heapq.heappop(free)
        else:
            thread, threads = threads, threads + 1
        heapq.heappush(busy, (r["finish_ms"], thread))
        name = f"requests {thread + 1}"
        args = {k: r[k] for k in ("id", "prompt_tokens", "output_tokens", "ttft_ms", "prefill_launches", "max_itl_ms")}
        whole = r["finish_ms"] - r["arrival_ms"]
        out.append(Span(policy["policy"], name, f"request {r['id']}", r["arrival_ms"], whole, args, category="request"))
        first = {"id": r["id"]}
        out.append(
            Span(policy["policy"], name, "to first token", r["arrival_ms"], r["ttft_ms"], first, category="request")
        )
    return out


def trace_notes(job: JobData) -> dict[str, Any]:
    """What the trace holds of the job: every request up to TRACE_REQUESTS, and the recorded launches."""
    launches = launches_by_policy(job)
    return {
        "job": job.id,
        "policies": {
            p["policy"]: {
                "requests": len(p["per_request"]),
                "requests_in_trace": min(len(p["per_request"]), TRACE_REQUESTS),
                "requests_truncated": len(p["per_request"]) > TRACE_REQUESTS,
                "launches": p["launches"]["total"],
                "launches_in_trace": len(launches.get(p["policy"], [])),
            }
            for p in finished_policies(job)
        },
        "note": f"every request up to {TRACE_REQUESTS} per policy (by arrival); launches: the first "
        "`launch_events` of each policy (the job's parameter)",
    }


VIEWS = KindViews(figures, event_types=("launch",), tables=tables, spans=spans, trace_notes=trace_notes)
