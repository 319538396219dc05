import dataclasses
import itertools

import pytest

from scheduler_core.catalog import Catalog, Graph, catalog_from_mapping
from scheduler_core.errors import InvalidInput
from scheduler_core.execution import AffineExecution, TableExecution, measured_catalog
from scheduler_core.planner import plan
from scheduler_core.request import Request
from scheduler_core.scheduler import PROGRESS_EVERY, Arrival, SchedulerConfig, Stall, schedule
from scheduler_core.traffic import TrafficShape, poisson_arrivals

EXECUTION = AffineExecution(2.0, 1 / 64, 0.10)
DECODE_ROWS = (1, 4, 8)
CLEAN = measured_catalog(EXECUTION, decode_rows=DECODE_ROWS)
TRACE_ALL = 10**6


def with_shapes(catalog: Catalog, *shapes: tuple[int, int, float | None]) -> Catalog:
    """`catalog` plus extra (prefill, decode, ms) graphs."""
    return Catalog(catalog.graphs + tuple(Graph(p, d, ms) for p, d, ms in shapes))


# The spec's stall catalog (64 ... 2048 at 1 ms, 4096 unmeasured) plus decode graphs.
STALL_CATALOG = with_shapes(
    catalog_from_mapping({64: 1, 128: 1, 256: 1, 512: 1, 1024: 1, 2048: 1, 4096: None}), (0, 1, 1.0), (0, 8, 1.0)
)
REQUEST_A = Request(6000, (), ((2000, 5000),))


def chunks(lane) -> list[tuple[int, int, int, str]]:
    return [(c.graph, c.start, c.end, c.chooser) for c in lane.chunks]


def test_it_gives_a_lone_request_the_plans_ttft_plus_its_init_launch():
    result = schedule([Arrival(0, 0.0, Request(14000), 1)], CLEAN, EXECUTION)
    (lane,) = result.lanes
    assert lane.ttft_ms == pytest.approx(
        EXECUTION.launch_ms(0, 0) + plan("rule", CLEAN, Request(14000), EXECUTION).ttft_ms
    )
    assert result.launch_counts == {"init": 1, "prefill": 4, "decode": 0, "mixed": 0}


# A boot of two solo graphs (costs not proportional to size) and one decode graph, as the truth.
TAIL_CATALOG = Catalog((Graph(1024, 0, 60.0), Graph(2048, 0, 150.0), Graph(0, 1, 4.0)))
TAIL_TRUTH = TableExecution({**{g.shape: g.ms for g in TAIL_CATALOG.graphs}, (0, 0): 0.0})


def test_a_catalog_that_pads_nothing_runs_a_tail_at_its_own_size_costed_between_two_graphs():
    unpadded = dataclasses.replace(TAIL_CATALOG, pads=False)
    result = schedule([Arrival(0, 0.0, Request(3180), 1)], unpadded, TAIL_TRUTH, SchedulerConfig("rule"))
    (lane,) = result.lanes
    assert [(c.graph, c.start, c.end, c.padding) for c in lane.chunks] == [(2048, 0, 2048, 0), (1132, 2048, 3180, 0)]
    assert lane.ttft_ms == pytest.approx(150.0 + 60.0 + 90.0 * 108 / 1024)
    assert result.padded_prefill_tokens == 0 and result.padded_prefill_ms == 0.0


def test_on_a_catalog_that_pads_nothing_a_mixed_launch_is_costed_between_the_mixed_graphs_of_its_rows():
    mixed = (Graph(0, 2, 5.0), Graph(1024, 1, 62.0), Graph(2048, 1, 152.0))
    unpadded = Catalog(TAIL_CATALOG.graphs + mixed, pads=False)
    truth = TableExecution({**{g.shape: g.ms for g in unpadded.graphs}, (0, 0): 0.0})
    arrivals = [Arrival(0, 0.0, Request(10), 50), Arrival(1, 1.0, Request(1132), 1)]
    result = schedule(arrivals, unpadded, truth, SchedulerConfig("rule", trace_limit=TRACE_ALL))
    (launch,) = [s for s in result.trace if s.kind == "mixed"]
    assert (launch.prefill, launch.decode, launch.lane) == (1132, 1, 1)
    assert launch.end_ms - launch.start_ms == pytest.approx(62.0 + 90.0 * 108 / 1024)


def test_a_padded_catalog_runs_the_tail_as_the_next_graph_and_counts_its_padding():
    result = schedule([Arrival(0, 0.0, Request(3180), 1)], TAIL_CATALOG, TAIL_TRUTH, SchedulerConfig("rule"))
    (lane,) = result.lanes
    assert [(c.graph, c.start, c.end) for c in lane.chunks] == [(2048, 0, 2048), (2048, 2048, 3180)]
    assert lane.ttft_ms == pytest.approx(300.0)
    assert result.padded_prefill_tokens == 916 and result.padded_prefill_ms == pytest.approx(150.0 * 916 / 2048)


def test_it_reports_the_rule_v1_stall_with_its_request_and_position_instead_of_hanging():
    arrivals = [Arrival(1, 0.0, Request(100), 3), Arrival(7, 500.0, REQUEST_A, 3)]
    result = schedule(arrivals, STALL_CATALOG, EXECUTION, SchedulerConfig("rule-v1"))
    assert result.stall == Stall(lane=7, position=0, policy="rule-v1")
    assert [lane.id for lane in result.lanes] == [1]


def test_the_fixed_rule_finishes_the_stall_request_with_the_catalogs_chunks():
    result = schedule([Arrival(0, 0.0, REQUEST_A, 2)], STALL_CATALOG, EXECUTION, SchedulerConfig("rule"))
    assert result.stall is None
    assert chunks(result.lanes[0])[:2] == [(2048, 0, 2000, "cost"), (4096, 2000, 6000, "cost")]


def test_the_measured_catalog_chooses_while_two_lanes_prefill_and_the_rule_once_one_is_left():
    # The pull request's 3.5k arm: cost takes 2048 + 1024 + 512, the rule one 4096.
    arrivals = [Arrival(0, 0.0, Request(3504), 1), Arrival(1, 0.0, Request(3504), 1)]
    first, second = schedule(arrivals, CLEAN, EXECUTION, SchedulerConfig("rule")).lanes
    assert [c[0] for c in chunks(first)] == [2048, 1024, 512] and first.solo == (False, False, False)
    assert chunks(second) == [(4096, 0, 3504, "rule")] and second.solo == (True,)


def test_it_pads_decode_rows_to_the_smallest_decode_graph():
    arrivals = [Arrival(i, 0.0, Request(50), 5) for i in range(3)]
    result = schedule(arrivals, CLEAN, EXECUTION, SchedulerConfig(trace_limit=TRACE_ALL))
    all_three = [s for s in result.trace if len(s.decode_lanes) == 3]
    assert all_three and all(s.kind == "decode" and s.decode == 4 for s in all_three)
    assert result.padded_decode_rows == sum(s.decode - len(s.decode_lanes) for s in result.trace)


def test_a_mixed_shape_carries_the_rule_chunk_when_decode_lanes_are_waiting():
    catalog = with_shapes(CLEAN, (4096, 8, EXECUTION.launch_ms(4096, 8)))
    arrivals = [Arrival(0, 0.0, Request(10), 50), Arrival(1, 20.0, Request(8192), 1)]
    result = schedule(arrivals, catalog, EXECUTION, SchedulerConfig(trace_limit=TRACE_ALL))
    target = [s for s in result.trace if s.lane == 1 and s.chunk is not None]
    assert [(s.kind, s.prefill, s.decode, s.decode_lanes) for s in target] == [("mixed", 4096, 8, (0,))] * 2


def test_a_mixed_shape_never_carries_a_chunk_the_rule_bailed_from():
    # At 0 the rule's graph is 4096 (unmeasured) and the catalog picks 2048: no mixed shape may carry it.
    # At 2000 the catalog picks 4096, which is the rule's graph again: a mixed shape may.
    catalog = with_shapes(STALL_CATALOG, (2048, 8, 0.5), (4096, 8, 0.5))
    arrivals = [Arrival(0, 0.0, Request(10), 200), Arrival(1, 20.0, REQUEST_A, 1)]
    result = schedule(arrivals, catalog, EXECUTION, SchedulerConfig("rule", trace_limit=TRACE_ALL))
    target = [s for s in result.trace if s.lane == 1 and s.chunk is not None]
    assert [(s.kind, s.chunk.graph, s.chunk.chooser) for s in target[:2]] == [
        ("prefill", 2048, "cost"),
        ("mixed", 4096, "cost"),
    ]


def test_it_interleaves_a_decode_launch_after_max_decode_wait_prefill_launches():
    arrivals = [Arrival(0, 0.0, Request(10), 100), Arrival(1, 20.0, Request(10 * 4096), 1)]
    result = schedule(arrivals, CLEAN, EXECUTION, SchedulerConfig(max_decode_wait=2, trace_limit=TRACE_ALL))
    during = [s.kind for s in result.trace if s.start_ms >= 20.0][:12]
    assert during == [
        "init",
        "prefill",
        "decode",
        "prefill",
        "prefill",
        "decode",
        "prefill",
        "prefill",
        "decode",
        "prefill",
        "prefill",
        "decode",
    ]


def test_it_waits_for_the_first_arrival_when_idle():
    result = schedule([Arrival(0, 1000.0, Request(64), 1)], CLEAN, EXECUTION, SchedulerConfig(trace_limit=1))
    assert result.trace[0].start_ms == 1000.0 and result.trace[0].kind == "init"


def test_it_never_admits_more_lanes_than_max_lanes():
    arrivals = [Arrival(i, 0.0, Request(100 + i), 4) for i in range(10)]
    result = schedule(arrivals, CLEAN, EXECUTION, SchedulerConfig(max_lanes=3, trace_limit=TRACE_ALL))
    admitted = {s.lane: s.index for s in result.trace if s.kind == "init"}
    last = {}
    for s in result.trace:
        for lane in s.decode_lanes + ((s.lane,) if s.lane is not None else ()):
            last[lane] = s.index
    for step in result.trace:
        assert sum(admitted[i] <= step.index <= last[i] for i in admitted) <= 3
    assert len(result.lanes) == 10


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"catalog": measured_catalog(EXECUTION)}, "catalog"),
        ({"config": SchedulerConfig(max_decode_wait=0)}, "max_decode_wait"),
        ({"config": SchedulerConfig(max_lanes=9)}, "max_lanes"),
        ({"config": SchedulerConfig(policy="fastest")}, "policy"),
        ({"arrivals": [Arrival(0, 0.0, Request(5), 1), Arrival(0, 1.0, Request(5), 1)]}, "arrivals[1].id"),
        ({"arrivals": [Arrival(0, 0.0, Request(5), 0)]}, "arrivals[0].output_tokens"),
        ({"arrivals": [Arrival(0, float("nan"), Request(5), 1)]}, "arrivals[0].arrival_ms"),
        ({"arrivals": [Arrival(0, 0.0, Request(5, prefill_limit=0), 1)]}, "arrivals[0].request"),
        ({"arrivals": [Arrival(0, 0.0, Request(5000, (), ((0, 4097),)), 1)]}, "arrivals[0].request.atomic_spans"),
    ],
    ids=[
        "no-decode-graph",
        "zero-wait",
        "too-many-lanes",
        "unknown-policy",
        "duplicate-id",
        "no-output",
        "nan-arrival",
        "nothing-to-prefill",
        "span-longer-than-full-chunk",
    ],
)
def test_it_rejects_input_it_could_never_finish(kwargs, field):
    args = {"arrivals": [Arrival(0, 0.0, Request(5), 1)], "catalog": CLEAN, "config": SchedulerConfig(), **kwargs}
    with pytest.raises(InvalidInput) as excinfo:
        schedule(args["arrivals"], args["catalog"], EXECUTION, args["config"])
    assert excinfo.value.field == field


def test_it_reports_progress_every_few_hundred_launches():
    calls = []
    result = schedule(
        [Arrival(0, 0.0, Request(64), 2000)],
        CLEAN,
        EXECUTION,
        on_progress=lambda done, launches: calls.append((done, launches)),
    )
    assert [count for _, count in calls] == list(range(PROGRESS_EVERY, result.launch_count + 1, PROGRESS_EVERY))


@pytest.mark.parametrize(
    "shape, policy, lanes",
    [
        (TrafficShape(50.0, 32, 9000, 1, 300, 0.0, 1), "rule", 8),
        (TrafficShape(400.0, 32, 3000, 1, 64, 0.3, 2), "cost", 8),
        (TrafficShape(5.0, 32, 16000, 1, 500, 0.0, 3), "rule", 4),
    ],
    ids=["busy-rule", "saturated-cost-spans", "sparse-rule"],
)
def test_decode_stretches_make_exactly_the_launches_of_step_by_step(shape, policy, lanes):
    """Launches kept in the trace go step by step; the rest through the decode stretch's shortcut:
    every figure of the run, each gap in its order and each progress call included, must agree."""
    arrivals = list(itertools.islice(poisson_arrivals(shape, CLEAN.full_chunk), 400))
    runs = {}
    for limit in (0, TRACE_ALL):
        calls: list[tuple[int, int]] = []
        config = SchedulerConfig(policy, max_lanes=lanes, trace_limit=limit)
        result = schedule(arrivals, CLEAN, EXECUTION, config, lambda done, n, calls=calls: calls.append((done, n)))
        runs[limit] = (result, calls)
    (fast, fast_calls), (stepped, stepped_calls) = runs[0], runs[TRACE_ALL]
    assert stepped.launch_counts["decode"] > 1000  # the stretches were exercised
    assert fast.lanes == stepped.lanes
    assert list(fast.itl_ms) == list(stepped.itl_ms)
    assert (fast.launch_counts, fast.padded_prefill_tokens, fast.padded_decode_rows, fast.end_ms) == (
        stepped.launch_counts,
        stepped.padded_prefill_tokens,
        stepped.padded_decode_rows,
        stepped.end_ms,
    )
    assert fast_calls == stepped_calls
