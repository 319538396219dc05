"""Each kind's figures, built from a real stored result: the traces, their names and values."""

from __future__ import annotations

import pytest

from heliosweb.figures.contract import JobData
from heliosweb.figures.palette import capacity_colour, policy_colour
from heliosweb.figures.registry import VIEWS, views_for
from heliosweb.jobs.registry import job_kinds
from scheduler_core.comparison import Pair, deltas_of

from .runs import SMALL, finished


def built(kind: str) -> dict:
    params, result, events = finished(kind)
    job = JobData(7, kind, "done", params, result, events, seq=len(events))
    return {f.id: f.figure for f in views_for(kind).figures(job)}


def test_every_job_kind_declares_its_figures():
    assert set(job_kinds()) <= set(VIEWS)


def test_colours_are_one_per_capacity_and_per_policy_and_stable():
    ladder = [capacity_colour(c) for c in (64, 128, 256, 512, 1024, 2048, 4096)]
    assert len(set(ladder)) == 7 and capacity_colour(512) == capacity_colour(512)
    assert capacity_colour(96) not in ladder and capacity_colour(96) == capacity_colour(96)
    assert policy_colour("cost") != policy_colour("rule") != policy_colour("rule-v1")


def test_pr22_timeline_has_a_row_per_catalog_and_policy_and_a_bar_per_launch():
    params, result, _ = finished("pr22")
    figures = built("pr22")
    assert list(figures) == ["ttft", "timeline-3.5k", "timeline-14k"]
    ttft = figures["ttft"]
    assert [t.name for t in ttft.data] == ["cost (before)", "rule (after)"]
    assert list(ttft.data[1].y) == [a["rule"]["ttft_ms"] for a in result["arms"]]
    timeline = figures["timeline-3.5k"]
    arms = [a for a in result["arms"] if a["arm"] == "3.5k"]
    launches = {
        (f"{a['catalog']} · {p}", c["graph"], c["start"])
        for a in arms
        for p in ("cost", "rule")
        for c in a[p]["chunks"]
    }
    graph_traces = [t for t in timeline.data if t.name.startswith("graph ")]
    drawn = {(y, int(t.name.split()[1]), cd[1]) for t in graph_traces for y, cd in zip(t.y, t.customdata)}
    assert drawn == launches
    for trace in graph_traces:
        assert trace.marker.color == capacity_colour(int(trace.name.split()[1]))
    # bars sit back to back: each row's bars (useful + padding) add up to its plan's launch times
    cost_clean = next(a for a in arms if a["catalog"] == "clean")["cost"]
    row = "clean · cost"
    total = sum(x for t in timeline.data if t.type == "bar" for y, x in zip(t.y, t.x) if y == row)
    assert total == pytest.approx(sum(c["true_ms"] for c in cost_clean["chunks"]))
    padding = next(t for t in timeline.data if t.name == "padding")
    padded = sum(
        c["graph"] - (c["end"] - c["start"]) > 0 for a in arms for p in ("cost", "rule") for c in a[p]["chunks"]
    )
    assert len(padding.x) == padded > 0


def test_sweep_draws_ttft_delta_launches_and_padding_and_links_points_to_explain():
    _, result, _ = finished("sweep")
    figures = built("sweep")
    names = [t.name for t in figures["ttft"].data]
    ran = list(result["series"]["clean"])  # every policy the sweep compared, then its pair's delta
    label = result["pair"]["label"]
    assert names == [n for c in ("clean", "drift") for n in (*(f"{c} {p}" for p in ran), f"{c}: {label}")]
    delta = figures["ttft"].data[len(ran)]
    assert list(delta.y) == result["delta_ms"]["clean"] and list(delta.x) == result["prompt_tokens"]
    counts = {t.name: list(t.y) for t in figures["launches-padding"].data}
    assert counts["drift rule launches"] == result["series"]["drift"]["rule"]["launches"]
    assert counts["clean cost padded tokens"] == result["series"]["clean"]["cost"]["padded_tokens"]
    assert figures["ttft"].data[0].meta["link"] == "/explain?job=7&catalog=clean&prompt_tokens={x}"
    # Log axes labelled 20 and 50, not a small "2" and "5" after 10.
    layout = figures["ttft"].layout
    assert [(a.type, a.dtick, a.tickformat) for a in (layout.xaxis, layout.yaxis)] == [("log", "D2", "~g")] * 2


def test_simulate_draws_lanes_the_latency_cdfs_and_launches_per_policy():
    params, result, events = finished("simulate")
    figures = built("simulate")
    ran = [p["policy"] for p in result["policies"]]
    assert list(figures) == [
        *(f"requests-{p}" for p in ran), *(f"lanes-{p}" for p in ran), "ttft-cdf", "itl-cdf", "launches-padding",
        "deltas",
    ]  # fmt: skip
    # the first two policies run, the same request under both: what the result stored for them
    assert (
        list(figures["deltas"].data[0].x) == result["deltas"]["cdf_ms"] and result["deltas"]["label"] == "rule − cost"
    )
    # Every request of a policy is a row: arrival to first token, then first to last token, each a
    # rectangle (five points: four corners and a gap) around the request's row.
    waiting, decoding = figures["requests-rule"].data
    per_request = result["policies"][1]["per_request"]
    centres = [(waiting.y[i] + waiting.y[i + 2]) / 2 for i in range(0, len(waiting.y), 5)]
    assert centres == pytest.approx([r["id"] for r in per_request])
    first = per_request[0]
    assert list(waiting.x[:2]) == [first["arrival_ms"], first["arrival_ms"] + first["ttft_ms"]]
    assert list(decoding.x[:2]) == [first["arrival_ms"] + first["ttft_ms"], first["finish_ms"]]
    assert figures["requests-rule"].layout.title.text == f"Requests, rule: all {len(per_request)} requests"
    lanes = figures["lanes-cost"]
    drawn = sorted({e["lane"] for e in events if e["type"] == "launch" and e["policy"] == "cost"} - {None})
    assert len(drawn) > 1 and f"requests {drawn[0]}-{drawn[-1]}" in lanes.layout.title.text
    cost_launches = [e for e in events if e["type"] == "launch" and e["policy"] == "cost"]
    assert len(cost_launches) == params["launch_events"]
    decode = next(t for t in lanes.data if t.name == "decode")
    assert len(decode.x) == sum(len(e["decode_lanes"]) for e in cost_launches)
    ttft = figures["ttft-cdf"]
    assert [t.name for t in ttft.data] == ran
    assert list(ttft.data[0].x) == sorted(r["ttft_ms"] for r in result["policies"][0]["per_request"])
    assert ttft.data[0].y[-1] == 1.0 and ttft.data[0].line.color == policy_colour("cost")
    itl = figures["itl-cdf"].data[1]
    assert list(itl.x) == result["policies"][1]["itl_quantiles_ms"] and len(itl.y) == 101
    launches = {t.name: list(t.y) for t in figures["launches-padding"].data}
    assert launches["prefill"] == [p["launches"]["prefill"] for p in result["policies"]]
    assert launches["padded prefill tokens"] == [p["padded_prefill_tokens"] for p in result["policies"]]


def test_boots_draws_distinct_sequences_and_the_ttft_range_per_policy():
    params, result, _ = finished("boots")
    figures = built("boots")
    distinct = figures["distinct"]
    assert [t.name for t in distinct.data] == params["policies"]
    assert list(distinct.data[0].y) == [row["cost"]["distinct_sequences"] for row in result["prompts"]]
    spread = figures["spread"].data[1]
    first = result["prompts"][0]
    row = first["rule"]["ttft_ms"]
    floor = min(first[p]["ttft_ms"]["min"] for p in ("cost", "rule"))
    assert spread.y[0] == pytest.approx(row["mean"] - floor)
    assert spread.error_y.array[0] + spread.y[0] + floor == pytest.approx(row["max"])
    assert spread.y[0] + floor - spread.error_y.arrayminus[0] == pytest.approx(row["min"])
    assert min(t.y[i] - t.error_y.arrayminus[i] for t in figures["spread"].data for i in range(2)) == pytest.approx(0)


def test_fuzz_draws_each_counterexample_up_to_its_stall_with_a_marker_at_the_position():
    _, result, _ = finished("fuzz")
    figures = built("fuzz")
    failures = figures["failures"]
    assert list(failures.data[0].y) == [result["policies"][p]["stalls"] for p in result["policies"]]
    example = result["policies"]["rule-v1"]["counterexample"]
    assert example is not None, "the small fuzz run must find rule-v1's stall"
    drawn = figures["counterexample-rule-v1"]
    position = example["failure"]["position"]
    marker = next(t for t in drawn.data if t.type == "scatter")
    assert list(marker.x) == [position] and marker.text == (f"stall at {position}",)
    plan_row = drawn.layout.yaxis.categoryarray[-1]
    bars = [t for t in drawn.data if t.type == "bar" and t.name.startswith("graph ") and set(t.y) == {plan_row}]
    assert sum(len(t.x) for t in bars) == len(example["launches"])
    # The input is drawn too: the whole prompt, its atomic spans, and each catalog graph from the stall.
    request = example["input"]["request"]
    by_name = {t.name: t for t in drawn.data}
    assert list(by_name["prompt tokens"].x) == [request["prompt_tokens"]]
    assert [
        [b, b + w] for b, w in zip(by_name["atomic span (not split)"].base, by_name["atomic span (not split)"].x)
    ] == (request["atomic_spans"])
    graphs = sorted({g["prefill"] for g in example["input"]["catalog"] if g["decode"] == 0})
    assert [(by_name[f"graph {g} from {position}"].base, by_name[f"graph {g} from {position}"].x) for g in graphs] == [
        ((position,), (g,)) for g in graphs
    ]
    assert drawn.layout.xaxis.range[0] == 0 and drawn.layout.xaxis.range[1] >= request["prompt_tokens"]


def test_capture_draws_a_trace_per_boot_with_its_drifted_shape_hatched():
    _, result, _ = finished("capture")
    shapes = built("capture")["shapes"]
    assert [t.name for t in shapes.data] == ["boot 0", "boot 1"]
    boot = result["boots"][1]["measurements"]
    assert list(shapes.data[1].y) == [m["median_ms"] for m in boot]
    assert list(shapes.data[1].x) == ["prefill 16", "prefill 32", "decode 2"]
    assert list(shapes.data[0].marker.pattern.shape) == ["", "x", ""]


def test_capture_writes_the_slowdown_each_drifted_shape_achieved_and_draws_it_against_the_undisturbed_median():
    _, result, _ = finished("capture")
    figures = built("capture")
    drifted = [(b, m) for b, boot in enumerate(result["boots"]) for m in boot["measurements"] if m["drifted"]]
    assert [(b, m["prefill"]) for b, m in drifted] == [(0, 32), (1, 32)]
    ratios = [f"\u00d7{m['drift_slowdown']:.2f}" for _, m in drifted]
    assert [list(t.text) for t in figures["shapes"].data] == [["", r, ""] for r in ratios]
    drift = figures["drift"]
    assert [t.name for t in drift.data] == ["undisturbed median", "median under drift (in the catalog)"]
    assert [list(t.x) for t in drift.data] == [["boot 0 \u00b7 prefill 32", "boot 1 \u00b7 prefill 32"]] * 2
    assert list(drift.data[0].y) == [m["clean_median_ms"] for _, m in drifted]
    assert list(drift.data[1].y) == [m["median_ms"] for _, m in drifted]
    assert list(drift.data[1].text) == ratios
    # The ratio drawn is the one the boot stored for its catalog.
    stored = [a["slowdown"] for boot in result["boots"] for a in boot["provenance"]["drift"]["achieved"]]
    assert [m["drift_slowdown"] for _, m in drifted] == stored


def _capture(measurements: list[dict]) -> JobData:
    result = {"measurements": measurements, "provenance": {}}
    return JobData(3, "capture", "done", {"drift_capacities": [32], "drift_load": 2}, result)


def _shape(prefill: int, median: float, clean: float | None = None) -> dict:
    row = {"prefill": prefill, "decode": 0, "median_ms": median, "p10_ms": median, "p90_ms": median, "samples": 5}
    if clean is None:
        return {**row, "drifted": False}
    return {**row, "drifted": True, "clean_median_ms": clean, "drift_slowdown": median / clean}


def test_a_stored_drifted_capture_titles_its_drift_figure_with_the_achieved_slowdown():
    job = _capture([_shape(16, 1.0), _shape(32, 3.0, clean=2.0)])
    figures = {f.id: f.figure for f in views_for("capture").figures(job)}
    drift = figures["drift"]
    assert drift.layout.title.text == "Drift achieved: \u00d71.50 (load 2)"
    assert [list(t.x) for t in drift.data] == [["prefill 32"], ["prefill 32"]]
    assert [list(t.y) for t in drift.data] == [[2.0], [3.0]]
    assert list(figures["shapes"].data[0].text) == ["", "\u00d71.50"]


def test_a_drift_that_did_not_slow_its_shape_says_so():
    job = _capture([_shape(32, 1.0, clean=2.0), _shape(64, 4.0, clean=2.0)])
    [_, drift] = views_for("capture").figures(job)
    assert drift.figure.layout.title.text == (
        "Drift achieved: \u00d70.50 to \u00d72.00 (load 2); below \u00d71.00 the load did not slow that shape"
    )


def test_a_capture_without_drift_draws_no_drift_figure():
    job = _capture([_shape(16, 1.0), _shape(32, 2.0)])
    assert [f.id for f in views_for("capture").figures(job)] == ["shapes"]


def test_a_running_capture_draws_what_it_streamed_and_declares_how_measurements_grow_it():
    params, _, events = finished("capture")
    streamed = [e for e in events if e["type"] == "measurement"][:2]
    job = JobData(8, "capture", "running", params, None, streamed, seq=2)
    [figure] = views_for("capture").figures(job)
    assert [len(t.y) for t in figure.figure.data] == [2, 0]
    [growth] = views_for("capture").growth
    assert (growth.event, growth.figure, growth.x, growth.y, growth.trace_field) == (
        "measurement",
        "shapes",
        "shape",
        "median_ms",
        "boot",
    )


def test_ttft_labels_the_prediction_error_and_draws_measured_launches_above_predicted():
    params, result, _ = finished("ttft")
    figures = built("ttft")
    measured = figures["ttft"].data[0]
    arm = result["arms"][0]
    assert measured.y[0] == arm["ttft_ms"]
    assert measured.text[0] == f"{100 * (arm['ttft_ms'] - arm['predicted_ms']) / arm['predicted_ms']:+.1f}%"
    timeline = figures["timeline-100"]
    rows = [y for t in timeline.data for y in t.y]
    assert set(rows) == {f"{p} {side}" for p in params["policies"] for side in ("measured", "predicted")}


def test_numerics_draws_both_differences_on_a_log_axis_with_the_tolerance():
    _, result, _ = finished("numerics")
    figures = built("numerics")
    diff = figures["differences"]
    assert [t.name for t in diff.data] == ["max absolute", "max relative", "tolerance (relative, float32)"]
    assert diff.layout.yaxis.type == "log"
    assert list(diff.data[2].y) == [result["tolerance"]["max_rel_diff"]] * 5
    assert diff.data[1].y[2] == (result["cost_vs_rule"]["max_rel_diff"] or None)
    chunkings = figures["chunkings"]
    assert chunkings.layout.xaxis.title.text == "prompt position (tokens)"


def test_pulse_draws_its_events_and_grows_from_each_new_one():
    _, _, events = finished("pulse")
    [figure] = views_for("pulse").figures(JobData(9, "pulse", "done", {}, {}, events))
    trace = figure.figure.data[0]
    assert list(trace.x) == list(range(20))
    [growth] = views_for("pulse").growth
    assert (growth.x, growth.y) == ("i", "elapsed_s")


def test_capacity_overlays_each_policy_s_curves_against_the_rate_with_the_slo_and_capacity():
    _, result, _ = finished("capacity")
    figures = built("capacity")
    assert list(figures) == ["ttft", "goodput", "attainment", "deltas"]
    rates = result["rates_per_s"]
    ttft = figures["ttft"]
    assert [t.name for t in ttft.data] == [f"{p['policy']} {q}" for p in result["policies"] for q in ("p99", "p50")]
    for trace, policy in zip(ttft.data[::2], result["policies"]):
        assert list(trace.x) == rates and list(trace.y) == [pt["ttft_p99_ms"]["mean"] for pt in policy["points"]]
        assert trace.line.color == policy_colour(policy["policy"])
        assert list(trace.error_y.array) == pytest.approx(
            [pt["ttft_p99_ms"]["high"] - pt["ttft_p99_ms"]["mean"] for pt in policy["points"]]
        )
    assert ttft.layout.shapes[0].y0 == result["slo"]["ttft_p99_ms"]
    goodput = figures["goodput"]
    assert goodput.data[0].name == "offered" and list(goodput.data[0].y) == rates
    for trace, policy in zip(goodput.data[1:], result["policies"]):
        assert list(trace.y) == [pt["goodput_per_s"]["mean"] for pt in policy["points"]]
        cap = policy["capacity_per_s"]
        assert trace.name.endswith("(capacity below the lowest rate)" if cap is None else f"(capacity {cap:g}/s)")
    caps = [p["capacity_per_s"] for p in result["policies"] if p["capacity_per_s"] is not None]
    assert sorted(s.x0 for s in goodput.layout.shapes) == sorted(caps)
    deltas = figures["deltas"]  # the first two policies run: cost, then rule
    compared = [deltas_of(d["comparisons"], Pair("cost", "rule")) for d in result["deltas"]]
    assert len(deltas.data) == len(rates) and list(deltas.data[0].x) == compared[0]["per_request"]["cdf_ms"]
    tables = views_for("capacity").tables(JobData(7, "capacity", "done", {}, result, pair=Pair("cost", "rule")))
    assert len(tables["points"]) == len(rates) * len(result["policies"]) and len(tables["worst"]) == sum(
        len(c["per_request"]["worst"]) for c in compared
    )


def test_a_job_without_a_result_says_what_to_wait_for():
    for kind in ("sweep", "boots", "fuzz", "ttft", "numerics"):
        [figure] = views_for(kind).figures(JobData(1, kind, "queued", {}, None))
        assert not figure.figure.data and figure.figure.layout.annotations[0].text


def test_the_vendored_plotly_bundle_draws_every_trace_type_the_product_emits():
    """Every trace type of every kind's figures, of /explain, and of the live page's figures is
    one the vendored partial bundle registers (read from the bundle itself)."""
    import re

    from heliosweb.figures.explain import plans_figure
    from heliosweb.figures.live import live_figures
    from heliosweb.figures.summary import describe

    from .conftest import ROOT

    bundle = (ROOT / "static/vendor/plotly/plotly-basic.min.js").read_text()
    registered = set(re.findall(r'moduleType:"trace",name:"([a-z0-9]+)"', bundle))
    assert {"scatter", "bar"} <= registered
    emitted: set[str] = set()
    for kind in job_kinds():
        if kind in SMALL:
            for figure in built(kind).values():
                emitted |= {t.type for t in figure.data}
    emitted |= {t.type for t in plans_figure([], "nothing").figure.data}
    for live in live_figures(changes=[], capacities=[512]):
        emitted |= {t["type"] for t in live["figure"]["data"]}
        emitted |= {t["type"] for g in live["growth"] for t in (g.get("traces") or {}).values()}
    assert emitted and emitted <= registered, emitted - registered
    assert describe([], {}) == "Nothing to draw yet."


def test_every_figure_has_a_text_summary_of_what_it_draws():
    from heliosweb.figures.contract import Figure

    for kind in SMALL:
        params, result, events = finished(kind)
        job = JobData(7, kind, "done", params, result, events, seq=len(events))
        for figure in views_for(kind).figures(job):
            summary = figure.as_dict()["summary"]
            assert summary and summary.endswith(".") and len(summary) < 600, (kind, figure.id, summary)
    ttft = Figure("ttft", "TTFT", built("pr22")["ttft"]).as_dict()["summary"]
    assert ttft == (
        "2 series: cost (before) (4 points), rule (after) (4 points); "
        "x: 4 categories (3.5k clean … 14k drift); TTFT (ms): 62.1 to 238.1."
    ), ttft


def test_figures_built_without_plotlys_point_check_are_what_the_checked_build_gives():
    """`contract.many_points` skips Plotly's check of every point: each such figure, built again
    through the check (which refuses anything invalid), gives the same JSON."""
    import json

    import plotly.graph_objects as go

    for figure_id, figure in built("simulate").items():
        checked = go.Figure(figure.to_dict())
        assert json.loads(checked.to_json()) == json.loads(figure.to_json()), figure_id


def test_the_requests_timeline_draws_a_row_of_at_least_two_pixels_each_part_one_shape():
    """19,500 requests: at most one row per two pixels of the plot area (more overlap and cost the
    browser's main thread for nothing), each row a bar at least MIN_BAR_PX thick, and each part
    one filled shape (Plotly draws a line broken by gaps as an SVG path per segment)."""
    from heliosweb.figures.simulate import MIN_BAR_PX, PLOT_PX, requests_timeline

    per_request = [
        {"id": i, "arrival_ms": 200.0 * i, "ttft_ms": 30.0, "finish_ms": 200.0 * i + 90, "prompt_tokens": 64,
         "prefill_launches": 1, "output_tokens": 4}
        for i in range(19_500)
    ]  # fmt: skip
    figure = requests_timeline("cost", per_request).figure
    assert [(t.mode, t.fill) for t in figure.data] == [("none", "toself")] * 2
    for trace in figure.data:
        rows = len(trace.y) // 5
        assert 100 <= rows <= PLOT_PX / 2, rows
        assert list(trace.y[4::5]) == [None] * rows  # a gap after each rectangle, none inside one
        step = trace.y[5] - trace.y[0]  # the ids between two rows drawn
        thickness_px = (trace.y[2] - trace.y[0]) / (step * rows) * PLOT_PX
        assert thickness_px >= MIN_BAR_PX - 1e-9
