"""The simulated engine on a real `engine` worker, talking HTTP to a real ASGI server: it follows
an applied decision for every request whose prefill begins after it, and its telemetry shows the
new version; a request already prefilling is planned and tagged by the old one to its end."""

from __future__ import annotations

import time

import pytest

from heliosweb.decisions import services as decisions
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.simengine.services import engine_start, engine_stop
from heliosweb.telemetry.models import EngineToken, TelemetryBatch

from .conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
BATCH_MS = 200


def records(engine: str, kind: str) -> list[dict]:
    return [r for b in TelemetryBatch.objects.filter(engine=engine) for r in b.records if r["type"] == kind]


def launches(engine: str) -> list[dict]:
    return records(engine, "launch")


def test_the_simulated_engine_switches_policy_within_a_second_of_an_apply(stack, recipe, maintainer, author, reviewer):
    stack.start_web()
    stack.start_engine_worker()
    job = engine_start(recipe=recipe, user=maintainer, params={"rate_per_s": 40.0, "batch_ms": BATCH_MS})
    engine = f"sim-job-{job.pk}"
    wait_until(lambda: len(launches(engine)) >= 5, timeout=90, what="the engine's first telemetry")
    assert {(r["policy"], r["version"]) for r in launches(engine)} == {("cost", 1)}

    decision = decisions.decision_propose(actor=author, recipe=recipe, policy="rule", rationale="watch it switch")
    decisions.decision_approve(actor=reviewer, decision=decision)
    decisions.decision_apply(actor=author, decision=decision)
    applied_ms = time.time() * 1000
    # Deadline for the wait only: what is checked is where the engine's own records switch.
    wait_until(
        lambda: any(r["t_ms"] > applied_ms + 1000 for r in launches(engine)), timeout=60, what="a second of telemetry"
    )
    later = [r for r in launches(engine) if r["t_ms"] > applied_ms + 1000]
    assert later and {(r["policy"], r["version"]) for r in later} == {("rule", 2)}
    # A finished request is tagged with the version that planned its chunks, whenever it finished:
    # its launches carry that version too, and a sequence never mixes the two policies.
    planned = {}
    for r in launches(engine):
        planned.setdefault(r["request"], set()).add((r["policy"], r["version"]))
    finished = [r for r in records(engine, "request") if r["request"] in planned]
    assert {(r["policy"], r["version"]) for r in finished} == {("cost", 1), ("rule", 2)}
    assert all(planned[r["request"]] == {(r["policy"], r["version"])} for r in finished)

    engine_stop(recipe=recipe)
    wait_until(lambda: BenchmarkJob.objects.get(pk=job.pk).status == "cancelled", timeout=30, what="the engine to stop")
    assert not EngineToken.objects.filter(engine=engine, revoked_at=None).exists()
