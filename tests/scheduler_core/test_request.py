import pytest

from scheduler_core.catalog import catalog_from_mapping
from scheduler_core.errors import InvalidInput
from scheduler_core.request import Request

CATALOG = catalog_from_mapping({64: 1.0, 4096: 2.0})


def test_segment_end_is_the_next_boundary_then_the_limit_then_the_prompt_end():
    r = Request(10_000, (3000, 6000), (), 8000)
    assert r.segment_end(0) == 3000
    assert r.segment_end(3000) == 6000
    assert r.segment_end(6000) == 8000
    assert Request(500).segment_end(100) == 500


def test_cut_moves_a_point_strictly_inside_a_span_back_to_its_start():
    r = Request(6000, (), ((2000, 5000),))
    assert r.cut(2000) == 2000
    assert r.cut(2001) == 2000
    assert r.cut(4999) == 2000
    assert r.cut(5000) == 5000


def test_consumed_is_cut_back_by_a_straddling_span():
    r = Request(6000, (), ((2000, 5000),))
    assert r.consumed(0, 4096) == 2000
    assert r.consumed(2000, 4096) == 4000
    assert r.consumed(2000, 2048) == 0


def test_plan_end_is_the_limit_cut_at_a_span():
    assert Request(6000, (), ((2000, 5000),), 3000).plan_end == 2000
    assert Request(6000, (), (), None).plan_end == 6000


@pytest.mark.parametrize(
    "data, field",
    [
        ({}, "request.prompt_tokens"),
        ({"prompt_tokens": 0}, "request.prompt_tokens"),
        ({"prompt_tokens": True}, "request.prompt_tokens"),
        ({"prompt_tokens": 10.0}, "request.prompt_tokens"),
        ({"prompt_tokens": 100, "message_boundaries": [0]}, "request.message_boundaries[0]"),
        ({"prompt_tokens": 100, "message_boundaries": [100]}, "request.message_boundaries[0]"),
        ({"prompt_tokens": 100, "message_boundaries": [50, 50]}, "request.message_boundaries[1]"),
        ({"prompt_tokens": 100, "atomic_spans": [[10, 10]]}, "request.atomic_spans[0]"),
        ({"prompt_tokens": 100, "atomic_spans": [[10, 101]]}, "request.atomic_spans[0].end"),
        ({"prompt_tokens": 100, "atomic_spans": [[10, 20, 30]]}, "request.atomic_spans[0]"),
        ({"prompt_tokens": 100, "atomic_spans": [[10, 30], [20, 40]]}, "request.atomic_spans[1]"),
        ({"prompt_tokens": 100, "atomic_spans": [[50, 60], [10, 20]]}, "request.atomic_spans[1]"),
        (
            {"prompt_tokens": 100, "message_boundaries": [15], "atomic_spans": [[10, 20]]},
            "request.message_boundaries[0]",
        ),
        ({"prompt_tokens": 100, "prefill_limit": 101}, "request.prefill_limit"),
        ({"prompt_tokens": 100, "prefill_limit": -1}, "request.prefill_limit"),
        ({"prompt_tokens": 100, "colour": "red"}, "request.colour"),
        ({"prompt_tokens": 10_000, "atomic_spans": [[0, 4097]]}, "request.atomic_spans[0]"),
    ],
)
def test_it_rejects_invalid_requests_naming_the_field(data, field):
    with pytest.raises(InvalidInput) as excinfo:
        Request.parse(data, CATALOG)
    assert excinfo.value.field == field


def test_it_rejects_span_longer_than_full_chunk():
    with pytest.raises(InvalidInput, match="longer than the full chunk 4096"):
        Request.parse({"prompt_tokens": 10_000, "atomic_spans": [[100, 4197]]}, CATALOG)


def test_a_boundary_at_a_span_edge_is_allowed():
    r = Request.parse({"prompt_tokens": 100, "message_boundaries": [10, 20], "atomic_spans": [[10, 20]]}, CATALOG)
    assert r.atomic_spans == ((10, 20),)
