"""Every scheduler_core analysis declares its result type, and a real run's result (small
parameters, through the one validation) has exactly that type: its readers (text, figures, the
trade-off) are type-checked against the declaration, so the declaration must be what `run` returns."""

from __future__ import annotations

import json

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.analyses.contract import ignore_events
from scheduler_core.typed_json import type_problems

# Beyond each analysis's declared example (`Analysis.example`): runs whose results take shapes the
# examples do not (a simulate in which the pre-fix rule stalls).
MORE = {
    "simulate with a stall": ("simulate", {"requests": 60, "span_share": 0.2, "policies": ["cost", "rule", "rule-v1"]})
}
RUNS = {name: (name, a.example) for name, a in ANALYSES.items()} | MORE


def test_every_analysis_declares_its_result_type_and_an_example_run():
    assert [name for name, a in ANALYSES.items() if a.result is None] == []
    assert [name for name, a in ANALYSES.items() if a.example is None] == []


@pytest.mark.parametrize("run", sorted(RUNS))
def test_a_real_result_has_its_declared_type(run):
    name, raw = RUNS[run]
    analysis = ANALYSES[name]
    params = analysis.validate(raw)
    result = json.loads(json.dumps(analysis.run(params, ignore_events)))  # as stored: JSON
    assert type_problems(result, analysis.result) == []
    assert analysis.format_text is not None and analysis.format_text(result)


def test_the_check_names_what_differs():
    """The checker itself: a missing key, an undeclared one, a wrong type deep inside."""
    result = json.loads(json.dumps(ANALYSES["sweep"].run(ANALYSES["sweep"].validate({"count": 3}), ignore_events)))
    result["series"]["clean"]["cost"]["launches"][0] = "3"
    result["series"]["clean"]["delta_ms"] = [0.0]  # the old shape: derived values among policies
    del result["spacing"]
    assert sorted(type_problems(result, ANALYSES["sweep"].result)) == [
        "result.series.clean.cost.launches[0]: '3' is not an integer",
        "result.series.clean.delta_ms: list, not an object (Series)",
        "result.spacing: missing (SweepResult)",
    ]
