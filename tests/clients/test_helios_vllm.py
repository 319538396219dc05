"""The vLLM plugin's own logic, without vLLM: settings, solo planning against `scheduler_core`'s
plan, the padded graph, the calibration and the records it builds. (In a real vLLM:
test_helios_vllm_engine.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from helios_client import record_problem
from helios_vllm.calibration import Calibration, capacities_for
from helios_vllm.ledger import Ledger
from helios_vllm.planning import SoloPlanner, padded_graph
from helios_vllm.settings import Settings, default_engine_name

from scheduler_core.catalog import DEFAULT_PREFILL_CAPACITIES, catalog_from_mapping
from scheduler_core.planner import plan
from scheduler_core.policies import selectable_policies
from scheduler_core.request import Request

# a CPU-like catalog whose per-token cost falls with size, except a slow 2048 (cost and rule differ)
CATALOG = catalog_from_mapping({64: 4.0, 128: 5.0, 256: 7.0, 512: 11.0, 1024: 19.0, 2048: 60.0})


def served(planner: SoloPlanner, request_id: str, prompt: int) -> list[tuple[int, int, str]]:
    """The chunks a solo prefill runs, step by step as the scheduler asks: (start, end, chooser)."""
    position, chunks = 0, []
    while position < prompt:
        launch = planner.solo_chunk(request_id, prompt, position)
        assert launch is not None and launch.start == position
        chunks.append((launch.start, launch.end, launch.chooser))
        position = launch.end
    planner.forget(request_id)
    return chunks


def test_settings_are_none_without_a_url_and_name_a_missing_variable():
    assert Settings.from_env({}) is None
    with pytest.raises(ValueError, match="HELIOS_TOKEN"):
        Settings.from_env({"HELIOS_URL": "http://h", "HELIOS_RECIPE": "r"})
    with pytest.raises(ValueError, match="HELIOS_ENGINE"):
        Settings.from_env({"HELIOS_URL": "http://h", "HELIOS_RECIPE": "r", "HELIOS_TOKEN": "t", "HELIOS_ENGINE": "a b"})
    full = Settings.from_env(
        {"HELIOS_URL": "http://h", "HELIOS_RECIPE": "r", "HELIOS_TOKEN": "t", "HELIOS_SPOOL": "/tmp/s"}
    )
    assert full is not None and full.spool == Path("/tmp/s") and full.engine.startswith("vllm-")


def test_the_default_engine_name_is_the_host_spelled_as_an_engine_name():
    assert default_engine_name("gpu-07.lab.example.org") == "vllm-gpu-07-lab-example-org"
    assert default_engine_name("x" * 100) == "vllm-" + "x" * 59


@pytest.mark.parametrize("policy", selectable_policies())
@pytest.mark.parametrize("prompt", [1, 63, 440, 2049, 3504, 9000])
def test_a_solo_prefill_runs_scheduler_cores_plan_launch_by_launch(policy, prompt):
    planner = SoloPlanner()
    planner.catalog = CATALOG
    planner.set_policy(policy, 3)
    expected = plan(policy, CATALOG, Request(prompt))
    assert served(planner, "r1", prompt) == [(l.start, l.end, l.chooser) for l in expected.launches]


def test_the_two_policies_chunk_differently_on_this_catalog():
    """(Else the test above could pass with the policy ignored.)"""
    chunks = {}
    for policy in ("cost", "rule"):
        planner = SoloPlanner()
        planner.catalog = CATALOG
        planner.set_policy(policy, 1)
        chunks[policy] = served(planner, "r", 3000)
    assert [e - s for s, e, _ in chunks["rule"]] == [2048, 952]
    assert chunks["cost"] != chunks["rule"]


def test_a_request_keeps_the_policy_its_prefill_began_with_and_the_next_takes_the_new_one():
    planner = SoloPlanner()
    planner.catalog = CATALOG
    planner.set_policy("rule", 1)
    chunks = [planner.solo_chunk("a", 5000, 0)]
    planner.set_policy("cost", 2)  # a decision applied while "a" prefills
    while chunks[-1] is not None and chunks[-1].end < 5000:
        chunks.append(planner.solo_chunk("a", 5000, chunks[-1].end))
    assert chunks == list(plan("rule", CATALOG, Request(5000)).launches)
    binding = planner.bind("b", 5000)
    assert binding is not None and (binding.name, binding.version) == ("cost", 2)


def test_nothing_is_planned_before_a_catalog_and_a_policy_are_known():
    planner = SoloPlanner()
    planner.set_policy("cost", 1)
    assert planner.solo_chunk("a", 100, 0) is None  # not calibrated yet
    planner = SoloPlanner()
    planner.catalog = CATALOG
    assert planner.solo_chunk("a", 100, 0) is None and planner.bind("a", 100) is None  # no policy read yet


def test_a_step_runs_padded_to_a_capture_size_or_unpadded_where_nothing_pads():
    assert padded_graph(300, (64, 128, 256, 512)) == 512
    assert padded_graph(256, (64, 128, 256, 512)) == 256
    assert padded_graph(600, (64, 128, 256, 512)) == 600  # larger than any graph: eager
    assert padded_graph(300, ()) == 300  # the CPU


def test_the_capacities_are_the_recipes_or_the_capture_sizes_or_the_defaults_that_fit_a_step():
    assert capacities_for(2048) == tuple(c for c in DEFAULT_PREFILL_CAPACITIES if c <= 2048)
    assert capacities_for(8192, [512, 1, 8, 8, 16384]) == (1, 8, 512)
    # the recipe's first (as its policy answer names them), then the capture sizes, then the defaults
    assert capacities_for(2048, (96, 384, 1536, 4096), (1, 8, 512)) == (96, 384, 1536)
    assert capacities_for(2048, (), (1, 8, 512)) == (1, 8, 512)
    assert capacities_for(2048, (4096,), ()) == tuple(c for c in DEFAULT_PREFILL_CAPACITIES if c <= 2048)
    with pytest.raises(ValueError, match="no capacity fits"):
        capacities_for(32)


def test_calibration_takes_the_warmups_then_rounds_of_repeats_and_keeps_the_fastest():
    calibration = Calibration((64, 128), warmup=1, repeats=3)
    taken = []
    samples = {64: [99.0, 2.0, 3.0, 50.0], 128: [99.0, 5.0, 4.0, 6.0]}
    while (sample := calibration.next()) is not None:
        capacity, warm = sample
        taken.append(sample)
        calibration.record(capacity, samples[capacity].pop(0))
    # one repeat of each capacity a round: a slow spell of the host slows a round, not a capacity
    assert taken == [
        (64, True),
        (128, True),
        (64, False),
        (128, False),
        (64, False),
        (128, False),
        (64, False),
        (128, False),
    ]
    assert calibration.catalog().prefill_ms == {64: 2.0, 128: 4.0}
    provenance = calibration.provenance({"device": "cpu"})
    assert provenance["repeats"] == 3 and provenance["samples_ms"]["64"] == [2.0, 3.0, 50.0]
    assert provenance["host_load"]["before"]["cores"] >= 1
    with pytest.raises(ValueError, match="expected"):
        Calibration((64,)).record(128, 1.0)


def test_the_ledger_builds_records_the_product_accepts_with_ttft_gaps_and_the_bound_version():
    records: list[dict] = []
    ledger = Ledger(records.append)
    ledger.arrived("cmpl-1", 3000, 1000.0)
    for (start, end), t in zip([(0, 2048), (2048, 3000)], (1000.05, 1000.09)):
        ledger.launched("cmpl-1", start=start, end=end, graph=end - start, chooser="rule",
                        binding=("rule", 4), t_s=t, ms=40.0)  # fmt: skip
    for t in (1000.10, 1000.12, 1000.15):
        ledger.tokens("cmpl-1", t)
    ledger.finished("cmpl-1", 1000.15)
    assert [record_problem(r) for r in records] == [None, None, None]
    launch, _, request = records
    assert launch["padded"] == 0 and launch["version"] == 4 and launch["t_ms"] == pytest.approx(1000050.0)
    assert request["launches"] == [2048, 952] and request["ttft_ms"] == pytest.approx(100.0)
    assert request["itl_ms"] == pytest.approx([20.0, 30.0]) and (request["policy"], request["version"]) == ("rule", 4)
    assert len(ledger) == 0


def test_the_ledger_makes_no_record_without_a_policy_and_counts_it():
    records: list[dict] = []
    ledger = Ledger(records.append)
    ledger.arrived("r", 10, 1.0)
    ledger.launched("r", start=0, end=10, graph=10, chooser="vllm", binding=None, t_s=1.1, ms=1.0)
    ledger.tokens("r", 1.2)
    ledger.finished("r", 1.2)
    ledger.finished("never-arrived", 1.3)
    assert records == [] and ledger.unattributed == 2


def test_the_link_reads_the_policy_and_the_recipes_capacities_before_the_engine_serves(tmp_path):
    """`Link.start` returns once the policy is read (the engine's first requests are then planned
    and recorded); a product that does not answer costs the start `wait_s`, then vLLM chooses."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from helios_client import Backoff
    from helios_vllm.link import Link

    class Policy(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("If-None-Match"):  # the long-poll after the first read: unchanged
                threading.Event().wait(0.2)
                self.send_response(304)
                self.end_headers()
                return
            body = {"recipe": "r", "policy": "rule", "version": 3, "decided_at": None, "decision": None,
                    "capacities": [96, 1536]}  # fmt: skip
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Policy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    planner = SoloPlanner()
    link = Link(Settings(url, "r", "t", "e", tmp_path / "spool"), planner)
    try:
        assert link.start(wait_s=10.0)
        assert planner.active == ("rule", 3) and link.capacities == (96, 1536)
    finally:
        link.stop()
        server.shutdown()
        server.server_close()
    away = Link(Settings(url, "r", "t", "e", None), SoloPlanner(), backoff=Backoff(first_s=0.05, maximum_s=0.1))
    try:
        assert not away.start(wait_s=0.5) and away.capacities == ()
    finally:
        away.stop()
