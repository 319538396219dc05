"""Exported Chrome traces as Chrome DevTools' own trace engine reads them (the performance panel's
parser, `@paulirish/trace_engine` from npm, run by node): every request with two launches or more
is an arrow binding each of its launches, as Perfetto and DevTools draw it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from heliosweb.telemetry.ingest import telemetry_ingest
from tests.heliosweb.telemetry_records import body, launch

from .conftest import ROOT
from .runs import store

NODE_TOOLS = ROOT / "tests" / "node"
ENGINE = NODE_TOOLS / "node_modules" / "@paulirish" / "trace_engine"
needs_trace_engine = pytest.mark.skipif(
    not (shutil.which("node") and ENGINE.exists()) and not os.environ.get("CI"),
    reason="needs node and `npm ci --prefix tests/node` (the DevTools trace engine); never skipped in CI",
)


def drawn_flows(trace: dict, where: Path) -> dict:
    path = where / "trace.json"
    path.write_text(json.dumps(trace))
    run = subprocess.run(
        ["node", str(NODE_TOOLS / "trace_flows.mjs"), str(path)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def arrows(trace: dict) -> list[int]:
    """How many launches each flow of the export links (start, steps and end)."""
    chains: dict[int, int] = {}
    for e in trace["traceEvents"]:
        if e["ph"] in "stf":
            chains[e["id"]] = chains.get(e["id"], 0) + 1
    return sorted(chains.values())


@needs_trace_engine
def test_devtools_draws_an_arrow_through_every_launch_of_each_multi_launch_request(client, viewer, tmp_path):
    client.force_login(viewer)
    job = store("simulate")  # the kind whose lanes interleave: pr22 and ttft lay one request per thread
    trace = client.get(f"/api/jobs/{job.pk}/trace.json").json()
    drawn = drawn_flows(trace, tmp_path)
    assert arrows(trace) and drawn["slices"] == sum(e["ph"] == "X" for e in trace["traceEvents"])
    assert sorted(drawn["flows"]) == arrows(trace)  # each arrow binds every launch of its request


def post_launches(recipe, engine: str, t0: float) -> None:
    """Request 1 in three chunks, then request 2 in one, 10 ms apart (as an engine launches them)."""
    chunks = [(1, 0, 2048, 2048), (1, 2048, 4096, 2048), (1, 4096, 4200, 512), (2, 0, 300, 512)]
    records = [
        launch(
            n, t_ms=t0 + 10 * n, request=rid, start=start, end=end, graph=graph, padded=graph - (end - start), ms=8.0
        )
        for n, (rid, start, end, graph) in enumerate(chunks)
    ]
    telemetry_ingest(recipe=recipe, data=body(records, engine=engine))


def test_an_engines_launches_over_a_window_export_as_a_trace_with_an_arrow_per_request(client, viewer, recipe):
    client.force_login(viewer)
    t0 = time.time() * 1000 - 5_000
    post_launches(recipe, "eng-a", t0)
    post_launches(recipe, "eng-b", t0 + 1)
    window = f"since_ms={t0 - 1}&until_ms={t0 + 1_000}"
    trace = client.get(f"/api/recipes/{recipe.name}/telemetry/trace.json?{window}").json()
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == 8 and {e["dur"] for e in slices} == {8000.0}
    processes = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert processes == {"eng-a", "eng-b"}
    assert arrows(trace) == [3, 3]  # request 1's three chunks, on each engine; request 2 had one launch
    one = client.get(f"/api/recipes/{recipe.name}/telemetry/trace.json?{window}&engine=eng-b").json()
    assert sum(e["ph"] == "X" for e in one["traceEvents"]) == 4


@pytest.mark.parametrize(
    ("query", "status", "field"),
    [
        ("since_ms=1796000000&until_ms=1796000001000", 400, "since_ms"),  # seconds, not milliseconds
        ("since_ms=1796000000000&until_ms=1796000600001", 400, "since_ms"),  # over 10 minutes
        ("since_ms=1796000000000&until_ms=1796000000000", 400, "since_ms"),
        ("since_ms=nan", 400, "since_ms"),
        ("until_ms=abc", 400, "until_ms"),
        ("until_ms=1_796_000_000_000", 400, "until_ms"),  # digits only, as everywhere the API reads numbers
        ("since_ms=1796000000000&until_ms=1796000060000", 404, "since_ms"),  # nothing then
    ],
)
def test_a_bad_or_empty_trace_window_is_refused_naming_it(client, viewer, recipe, query, status, field):
    client.force_login(viewer)
    response = client.get(f"/api/recipes/{recipe.name}/telemetry/trace.json?{query}")
    assert (response.status_code, response.json()["field"]) == (status, field), response.content


@needs_trace_engine
def test_devtools_draws_the_arrows_of_an_engines_trace(client, viewer, recipe, tmp_path):
    client.force_login(viewer)
    t0 = time.time() * 1000 - 5_000
    post_launches(recipe, "eng-a", t0)
    trace = client.get(f"/api/recipes/{recipe.name}/telemetry/trace.json?since_ms={t0 - 1}&until_ms={t0 + 1_000}")
    assert drawn_flows(trace.json(), tmp_path) == {"flows": [3], "slices": 4}
