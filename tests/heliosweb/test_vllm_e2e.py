"""A real vLLM (its cached virtualenv, installed if missing) with the helios-vllm plugin against a
running stack: the boot it measures arrives; what it serves is stored under the policy version in
force; after a decision, a new solo prefill's chunks are `scheduler_core`'s plan for the new
policy, launch by launch; what it serves while the product is away survives its stop (the spool)
and a restart.

Minutes, not seconds (each test starts vLLM, ~80-400 s on this machine): marker `vllm`. `.ci/run`
runs the policy test alone: it ends with vLLM stopped while the product is away, and the spool it
leaves resumed by a reporter as the restarted plugin resumes it (seconds); the whole restart (a
second vLLM start) is the last test's."""

from __future__ import annotations

import json
import socket

import pytest
from helios_client import TelemetryReporter
from helios_vllm import models as model

from heliosweb.catalogs.models import Boot
from heliosweb.decisions import services as decisions
from heliosweb.telemetry.models import TelemetryBatch
from heliosweb.telemetry.tokens import engine_token_create
from scheduler_core.catalog import Catalog
from scheduler_core.planner import plan
from scheduler_core.request import Request
from scheduler_core.scheduler import Arrival
from scheduler_core.traffic import read_trace
from vllm_loop import driver, venv
from vllm_loop.server import ServeConfig, VllmServer
from vllm_loop.watch import DEFAULT_TRACE

from .conftest import wait_until

# Two vLLM starts of 80-200 s each on a loaded 2-core machine, beyond the suite's 600 s per test.
pytestmark = [pytest.mark.vllm, pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(1500)]
ENGINE = "vllm-e2e-real"
SHAPE = "tiny"
SOLO_PROMPT = 5_000  # one request alone: three chunks under either policy at a 2,048 budget


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def vllm_env() -> venv.Env:
    """The cached virtualenv (installed here if missing: ~8 minutes) with this checkout's plugin."""
    env = venv.ensure(say=print)
    if not env.has_plugin():
        pytest.fail("helios-vllm is not beside vLLM's virtualenv: clients/vllm is not a package in this checkout")
    return env


def records(**match: object) -> list[dict]:
    rows = [r for b in TelemetryBatch.objects.filter(engine=ENGINE) for r in b.records]
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def lone(request_id: int, prompt: int, output: int = 2) -> Arrival:
    return Arrival(request_id, 0.0, Request(prompt), output)


def vllm_server(stack, recipe, vllm_env, tmp_path) -> VllmServer:
    """vLLM with the plugin, its engine token and spool, pointed at the stack (not started)."""
    token = engine_token_create(engine=ENGINE, recipes=[recipe])
    config = ServeConfig(
        model=model.write(tmp_path / "model", SHAPE),
        port=free_port(),
        log=tmp_path / "vllm.log",
        max_model_len=model.max_context(SHAPE),
        env={
            "HELIOS_URL": stack.base_url,
            "HELIOS_RECIPE": recipe.name,
            "HELIOS_TOKEN": token,
            "HELIOS_ENGINE": ENGINE,
            "HELIOS_SPOOL": str(tmp_path / "spool"),
        },
    )
    return VllmServer(vllm_env, config)


SERVE = dict(vocab=model.vocab(SHAPE), max_context=model.max_context(SHAPE))


def test_a_real_vllm_follows_the_decided_policy(stack, recipe, author, reviewer, vllm_env, tmp_path):
    stack.start_web()
    server = vllm_server(stack, recipe, vllm_env, tmp_path)
    serve = SERVE
    try:
        server.start(print)
        # A few dozen requests of the coding trace, at its own pace, under cost (version 1).
        trace = list(read_trace(str(DEFAULT_TRACE)).select(None, 30, 1.0).arrivals())
        served = driver.replay(server.url, trace, **serve)
        assert all(s.ttft_ms is not None for s in served), [s.error for s in served if s.error]
        wait_until(lambda: len(records(type="request")) >= 30, timeout=60, what="30 request records")
        assert {(r["policy"], r["version"]) for r in records(type="request")} == {("cost", 1)}
        # The first request started the calibration: its catalog arrived as a boot of the recipe.
        wait_until(lambda: Boot.objects.filter(recipe=recipe).exists(), timeout=60, what="the plugin's boot")
        boot = Boot.objects.filter(recipe=recipe).latest("created_at")
        assert boot.provenance["vllm_version"] == "0.32.0" and boot.provenance["engine"] == "vllm", boot.provenance

        decision = decisions.decision_propose(actor=author, recipe=recipe, policy="rule", rationale="real engine")
        decisions.decision_approve(actor=reviewer, decision=decision)
        decisions.decision_apply(actor=author, decision=decision)

        # The next solo prefill that begins after the change is planned by the rule, version 2.
        solos: list[int] = []  # each sent; the last one's record may still be on its way

        def solo_under_rule() -> bool:
            solos.append(90_000 + len(records(type="request")))
            driver.replay(server.url, [lone(solos[-1], SOLO_PROMPT)], **serve)
            wait_until(lambda: records(type="request", prompt_tokens=SOLO_PROMPT), timeout=30, what="its record")
            return any(r["version"] == 2 for r in records(type="request", prompt_tokens=SOLO_PROMPT))

        wait_until(solo_under_rule, timeout=90, interval=1, what="a solo prefill under version 2")
        request = next(r for r in records(type="request", prompt_tokens=SOLO_PROMPT) if r["version"] == 2)
        launched = sorted((r for r in records(type="launch", request=request["request"])), key=lambda r: r["start"])
        planned = plan("rule", Catalog.from_dicts(boot.catalog), Request(SOLO_PROMPT)).launches
        # On a CPU nothing pads: a record's graph is the tokens it carried, so the chunks are compared.
        assert [(r["start"], r["end"], r["chooser"]) for r in launched] == [
            (p.start, p.end, p.chooser) for p in planned
        ]
        assert request["policy"] == "rule"

        # vLLM stopped while the product is away loses no record: what it served meanwhile is in
        # its spool once it has stopped (vLLM gave its engine core --shutdown-timeout to run the
        # plugin's shutdown), and reaches the product through a reporter made on that spool, as
        # the restarted plugin's is (its first act; the whole restart is the next test's). First every
        # record of what was served before arrives (else the last solo's would be spooled too).
        wait_until(lambda: len(records(type="request")) >= len(trace) + len(solos), timeout=30, what="every record")
        before = len(records(type="request"))
        stack.stop_web()
        gone = driver.replay(server.url, [lone(95_000 + i, 300) for i in range(5)], **serve)
        assert all(s.ttft_ms is not None for s in gone)
        server.stop()
        spool = tmp_path / "spool"
        kept = [r for p in spool.glob("*.json") for r in json.loads(p.read_text())["records"]]
        assert sum(r["type"] == "request" for r in kept) == 5, (
            f"{len(kept)} records in the spool:\n{server.log_tail(40)}"
        )
        stack.start_web()
        env = server.config.env
        TelemetryReporter(
            stack.base_url, recipe.name, env["HELIOS_TOKEN"], ENGINE, spool=spool, flush_on_exit=False
        ).close(timeout_s=60)
        assert len(records(type="request")) == before + 5 and not list(spool.glob("*.json"))
    finally:
        server.stop()


def test_records_made_while_the_product_is_away_survive_a_vllm_restart(stack, recipe, vllm_env, tmp_path):
    stack.start_web()
    server = vllm_server(stack, recipe, vllm_env, tmp_path)
    serve = SERVE
    try:
        server.start(print)
        # The product goes away; what vLLM serves meanwhile is spooled, and survives its restart.
        before = len(records(type="request"))
        stack.stop_web()
        gone = driver.replay(server.url, [lone(95_000 + i, 300) for i in range(5)], **serve)
        assert all(s.ttft_ms is not None for s in gone)
        server.stop()
        server.start(print)
        stack.start_web()
        try:
            wait_until(lambda: len(records(type="request")) >= before + 5, timeout=120, what="the spooled records")
        except AssertionError:
            spooled = sorted(p.name for p in (tmp_path / "spool").glob("*"))
            raise AssertionError(
                f"{len(records(type='request')) - before} of 5 request records arrived; spool {spooled}; "
                f"vLLM's log ends:\n{server.log_tail(40)}"
            ) from None
        assert len(records(type="request")) == before + 5
    finally:
        server.stop()
