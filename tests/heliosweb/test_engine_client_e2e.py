"""An engine written with the client package (`clients/python`) against a real ASGI server: it
connects, follows an applied decision, posts string request ids through the worked vLLM example's
mapper, and restarts (a new session, batch numbers from 1 again) with nothing lost."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from helios_client import Policy, PolicyWatcher, TelemetryReporter

from heliosweb.decisions import services as decisions
from heliosweb.telemetry.models import TelemetryBatch
from heliosweb.telemetry.tokens import engine_token_create

from .conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
ENGINE = "vllm-e2e"
EXAMPLE = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / "vllm_step.py"


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_step", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def serve(vllm: ModuleType, reporter: TelemetryReporter, policy: Policy, first: int, count: int) -> list[str]:
    """`count` requests of 3,000 prompt tokens, each two prefill steps on the 2,048 graph and five
    output tokens; their ids."""
    mapper, ids, now = vllm.StepMapper(), [], time.time() * 1000
    for n in range(first, first + count):
        rid = f"cmpl-{n:04d}-{'x' * 40}"
        for i, (done, new) in enumerate(((0, 2048), (2048, 952))):
            step = vllm.Step(now + i, 20.0, 2048, [vllm.PrefillChunk(rid, done, new)])
            for record in mapper.launches(step, policy):
                assert reporter.add(record)
        tokens = [now + 40 + 3 * k for k in range(5)]
        assert reporter.add(mapper.finished(vllm.Finished(rid, 3000, now, tokens), policy))
        ids.append(rid)
    return ids


def stored() -> list[tuple[str, int, dict]]:
    return [(b.session, b.batch, r) for b in TelemetryBatch.objects.filter(engine=ENGINE) for r in b.records]


def test_a_client_package_engine_follows_a_change_and_survives_its_restart(stack, recipe, author, reviewer):
    stack.start_web()
    token = engine_token_create(engine=ENGINE, recipes=[recipe])
    vllm = example()

    watcher = PolicyWatcher(stack.base_url, recipe.name, token, wait_s=5)
    changes: list[Policy] = []
    watcher.on_change(changes.append)
    first = watcher.start()
    assert (first.policy, first.version) == ("cost", 1)
    reporter = TelemetryReporter(stack.base_url, recipe.name, token, ENGINE, batch_records=7, interval_s=0.1)
    sent = serve(vllm, reporter, first, 0, 10)

    decision = decisions.decision_propose(actor=author, recipe=recipe, policy="rule", rationale="follow it")
    decisions.decision_approve(actor=reviewer, decision=decision)
    decisions.decision_apply(actor=author, decision=decision)
    wait_until(lambda: changes, timeout=30, what="the watcher to hear of the change")
    assert watcher.current == changes[0] and (changes[0].policy, changes[0].version) == ("rule", 2)
    sent += serve(vllm, reporter, changes[0], 10, 10)
    reporter.close()
    watcher.stop()
    before = reporter

    # The engine restarts: a new watcher and reporter, a new session, batch numbers from 1 again.
    watcher = PolicyWatcher(stack.base_url, recipe.name, token, wait_s=5)
    now = watcher.start()
    reporter = TelemetryReporter(stack.base_url, recipe.name, token, ENGINE, batch_records=7, interval_s=0.1)
    assert reporter.session != before.session
    sent += serve(vllm, reporter, now, 20, 10)
    reporter.close()
    watcher.stop()

    rows = stored()
    for r, records in ((before, 60), (reporter, 30)):
        assert (r.stats.posted_records, r.stats.dropped_records, r.stats.refused_batches) == (records, 0, 0)
    assert len(rows) == 90  # 30 requests x (2 launches + 1 finish): nothing lost
    assert sorted({r["request"] for _, _, r in rows}) == sorted(sent)
    sessions = {session for session, _, _ in rows}
    assert sessions == {before.session, reporter.session}
    for session in sessions:  # each session numbered its batches from 1, without a gap
        numbers = sorted({n for s, n, _ in rows if s == session})
        assert numbers == list(range(1, len(numbers) + 1))
    by_request = {r["request"]: (r["policy"], r["version"]) for _, _, r in rows if r["type"] == "request"}
    assert {by_request[rid] for rid in sent[:10]} == {("cost", 1)}
    assert {by_request[rid] for rid in sent[10:]} == {("rule", 2)}
    launches = [r for _, _, r in rows if r["type"] == "launch"]
    assert {(r["graph"], r["end"] - r["start"], r["padded"]) for r in launches} == {(2048, 2048, 0), (2048, 952, 1096)}


def test_the_example_runs_as_documented_and_fails_loudly_when_nothing_is_stored(stack, recipe):
    """docs/engines.md: `vllm_step.py URL RECIPE TOKEN ENGINE`, the engine the token was made for;
    run as a script, exit 0 once its 3 records are stored, 1 when the server refused them."""
    stack.start_web()
    token = engine_token_create(engine=ENGINE, recipes=[recipe])

    def run(engine: str) -> subprocess.CompletedProcess[str]:
        args = [sys.executable, str(EXAMPLE), stack.base_url, recipe.name, token, engine]
        return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)

    done = run(ENGINE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("posted 3 records") and len(stored()) == 3
    refused = run("some-other-engine")  # the token posts only as its own engine: every batch is refused
    assert refused.returncode == 1 and "posted 0 records" in refused.stdout
    assert "error:" in refused.stderr and len(stored()) == 3
    assert subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, check=False).returncode == 2
