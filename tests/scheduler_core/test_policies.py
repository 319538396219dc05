import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_core.catalog import catalog_from_mapping, noise
from scheduler_core.errors import InvalidInput, Stalled
from scheduler_core.execution import AffineExecution, measured_catalog
from scheduler_core.planner import plan
from scheduler_core.policies import POLICIES, PrefillState, RulePolicy, make_policy, selectable_policies
from scheduler_core.request import Request

EXECUTION = AffineExecution(2.0, 1 / 64, 0.10)
CLEAN = measured_catalog(EXECUTION)
# The spec's stall catalog: 64 ... 2048 measured at 1 ms each, 4096 unmeasured.
STALL_CATALOG = catalog_from_mapping({64: 1, 128: 1, 256: 1, 512: 1, 1024: 1, 2048: 1, 4096: None})
REQUEST_A = Request(6000, (), ((2000, 5000),))
REQUEST_B = Request(9000, (6000,), ((2000, 5000),))


@pytest.mark.parametrize("request_", [REQUEST_A, REQUEST_B], ids=["span", "boundary-and-span"])
def test_the_pre_fix_rule_stalls_at_position_zero(request_):
    with pytest.raises(Stalled) as excinfo:
        plan("rule-v1", STALL_CATALOG, request_)
    assert excinfo.value.position == 0


@pytest.mark.parametrize("request_", [REQUEST_A, REQUEST_B], ids=["span", "boundary-and-span"])
def test_the_fixed_rule_finishes_where_the_pre_fix_rule_stalls(request_):
    result = plan("rule", STALL_CATALOG, request_)
    assert result.launches[-1].end == request_.prompt_tokens
    assert [(l.start, l.end) for l in result.launches[:2]] == [(0, 2000), (2000, 6000)]


def test_the_fixed_rule_bails_to_the_catalog_on_the_stall_request():
    launches = plan("rule", STALL_CATALOG, REQUEST_A).launches
    assert [(l.graph, l.start, l.end, l.chooser) for l in launches] == [
        (2048, 0, 2000, "cost"),
        (4096, 2000, 6000, "cost"),
    ]


@pytest.mark.parametrize(
    "tokens, catalog_name, cost, rule",
    [
        (3504, "clean", (3, 62.10), (1, 66.10)),
        (3504, "drift", (3, 62.10), (1, 66.10)),
        (14000, "clean", (6, 232.10), (4, 232.10)),
        (14000, "drift", (9, 238.10), (4, 232.10)),
    ],
)
def test_it_reproduces_the_pull_request_table(tokens, catalog_name, cost, rule):
    from scheduler_core.catalog import drift

    catalog = CLEAN if catalog_name == "clean" else drift(CLEAN, 4096, 1.6)
    for policy, (launches, ttft) in (("cost", cost), ("rule", rule)):
        result = plan(policy, catalog, Request(tokens), EXECUTION)
        assert len(result.launches) == launches
        assert result.ttft_ms == pytest.approx(ttft, abs=1e-9)


def test_rule_takes_full_chunks_then_the_smallest_covering_graph():
    result = plan("rule", CLEAN, Request(14000))
    assert result.graphs == (4096, 4096, 4096, 2048)
    assert all(l.chooser == "rule" for l in result.launches)


def test_rule_bails_when_its_graph_is_unmeasured_even_without_spans():
    catalog = catalog_from_mapping({64: 3.0, 128: 4.0, 256: None})
    launch = RulePolicy().choose(PrefillState(catalog, Request(200), 0))
    assert launch is not None and launch.chooser == "cost"  # the rule fell back: cost chose


def test_cost_prefers_less_padding_when_times_tie():
    # 1712 tokens: 2048 alone and 1024+512+256 both cost 34 ms; fewer launched tokens wins.
    assert plan("cost", CLEAN, Request(1712)).graphs == (1024, 512, 256)


def test_cost_prefers_fewer_launches_when_time_and_tokens_tie():
    catalog = catalog_from_mapping({64: 1.0, 128: 2.0})
    assert plan("cost", catalog, Request(128)).graphs == (128,)


def test_cost_prefers_the_larger_first_graph_on_a_full_tie():
    catalog = catalog_from_mapping({64: 1.0, 128: 3.0, 192: 2.0})
    # 256 tokens: 64+192 and 192+64 tie on every count; the larger first graph goes first.
    assert plan("cost", catalog, Request(256)).graphs == (192, 64)


def test_cost_never_launches_an_unmeasured_graph_that_duplicates_a_smaller_ones_work():
    catalog = catalog_from_mapping({64: 5.0, 128: None})
    assert plan("cost", catalog, Request(50)).graphs == (64,)


def test_a_limit_inside_a_span_stops_the_plan_at_the_span_start():
    result = plan("cost", CLEAN, Request(6000, (), ((2000, 5000),), 3000))
    assert result.end == 2000 and result.launches[-1].end == 2000


def test_the_selectable_policies_are_the_registered_ones_that_declare_it_and_never_rule_v1():
    assert selectable_policies() == tuple(name for name, cls in POLICIES.items() if cls.selectable)
    assert "rule-v1" in POLICIES and "rule-v1" not in selectable_policies()  # it stalls: analyses only
    for name in POLICIES:
        assert make_policy(name).name == name
    with pytest.raises(InvalidInput, match="unknown policy"):
        make_policy("fastest")


@st.composite
def requests(draw):
    n = draw(st.integers(1, 40_000))
    points = sorted(draw(st.sets(st.integers(1, n - 1), max_size=6))) if n > 1 else []
    spans, boundaries = [], []
    i = 0
    while i + 1 < len(points):
        if draw(st.booleans()) and points[i + 1] - points[i] <= 4096:
            spans.append((points[i], points[i + 1]))
            i += 2
        else:
            boundaries.append(points[i])
            i += 1
    limit = draw(st.one_of(st.none(), st.integers(0, n)))
    return Request(n, tuple(boundaries), tuple(spans), limit)


@settings(max_examples=150, deadline=None)
@given(request_=requests(), seed=st.integers(0, 10_000))
def test_rule_launches_do_not_depend_on_measurements_when_its_graphs_are_measured(request_, seed):
    noisy = noise(CLEAN, seed=seed, sigma=0.3)
    assert plan("rule", CLEAN, request_).graphs == plan("rule", noisy, request_).graphs


@settings(max_examples=150, deadline=None)
@given(request_=requests(), policy=st.sampled_from(selectable_policies()))
def test_every_plan_is_contiguous_and_reaches_the_end(request_, policy):
    result = plan(policy, CLEAN, request_)
    position = 0
    for launch in result.launches:
        assert launch.start == position and launch.end > position
        assert launch.end - launch.start <= launch.graph
        position = launch.end
    assert position == request_.plan_end


@settings(max_examples=40, deadline=None)
@given(
    costs=st.lists(st.one_of(st.none(), st.floats(0.1, 100.0), st.integers(1, 30).map(float)), min_size=7, max_size=7),
    remaining=st.lists(st.integers(1, 200_000), min_size=1, max_size=8),
)
def test_the_cost_tables_periodic_tail_equals_a_fully_filled_table(costs, remaining):
    from scheduler_core.policies import _RemainderTable, totals_equal

    catalog = catalog_from_mapping(dict(zip((64, 128, 256, 512, 1024, 2048, 4096), costs)))
    derived, filled = _RemainderTable(catalog), _RemainderTable(catalog)
    filled.window = 10**9  # never declares a period: every row computed
    for r in remaining:
        a, b = derived.best(r), filled.best(r)
        assert a[1:] == b[1:] and totals_equal(a[0], b[0])
