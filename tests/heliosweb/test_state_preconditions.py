"""State changes carry a precondition (issue 18, row 6): an emergency rollback names the version it
rolls back from and a decision is applied from its base version, so a retry, a double click or a
second operator gets 409 instead of undoing the change just made. Real threads on the real
database (SQLite's file or PostgreSQL, whichever DATABASE_URL names)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connections
from django.test import Client

from heliosweb.audit.models import AuditEvent
from heliosweb.common.errors import Conflict
from heliosweb.decisions import services as decisions
from heliosweb.decisions.selectors import audit_verify
from heliosweb.recipes.models import PolicySetting
from heliosweb.recipes.services import policy_rollback_emergency, policy_set, recipe_create

from .conftest import grant

JSON = "application/json"
THREADS = 6


def operator(name: str = "olga") -> User:
    user = User.objects.create_user(name)
    user.user_permissions.add(Permission.objects.get(codename="rollback_policy"))
    return User.objects.get(pk=user.pk)


def all_at_once(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run each call in its own thread (its own database connection), released together by a barrier."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = calls[i]()
        except Exception as exc:  # the test reads what each thread got
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a thread never finished"
    return results


@pytest.fixture
def bad_policy_applied(transactional_db: None) -> Any:
    """tiny-cpu moved from cost to rule (v2): the change an incident rolls back."""
    recipe = recipe_create(name="tiny-cpu", policy="cost")
    policy_set(recipe=recipe, policy="rule")
    return recipe


@pytest.mark.django_db(transaction=True)
def test_concurrent_api_rollbacks_one_succeeds_the_others_409_and_the_bad_policy_never_comes_back(
    bad_policy_applied,
):
    clients = []
    for i in range(THREADS):
        client = Client()
        client.force_login(operator(f"op-{i}"))
        clients.append(client)

    def rollback(client: Client) -> Callable[[], Any]:
        body = {"reason": "TTFT p99 doubled", "from_version": 2}
        return lambda: client.post("/api/recipes/tiny-cpu/rollback/", body, content_type=JSON)

    responses = all_at_once([rollback(c) for c in clients])
    statuses = sorted(r.status_code if not isinstance(r, Exception) else repr(r) for r in responses)
    assert statuses == [200] + [409] * (THREADS - 1), statuses
    refused = [r.json() for r in responses if r.status_code == 409]
    assert all(body["field"] == "from_version" and "rolled it back already" in body["error"] for body in refused)
    setting = PolicySetting.objects.get()
    assert (setting.policy, setting.version) == ("cost", 3)
    assert AuditEvent.objects.filter(action="emergency_rollback").count() == 1
    assert AuditEvent.objects.filter(action="policy_changed").count() == 2  # the bad change and its one rollback
    assert audit_verify().ok


@pytest.mark.django_db(transaction=True)
def test_concurrent_service_rollbacks_exactly_one_succeeds(bad_policy_applied):
    operators = [operator(f"op-{i}") for i in range(THREADS)]
    results = all_at_once(
        [
            lambda user=user: policy_rollback_emergency(
                recipe=bad_policy_applied, actor=user, reason="incident", from_version=2
            )
            for user in operators
        ]
    )
    assert sum(isinstance(r, PolicySetting) for r in results) == 1
    assert sum(isinstance(r, Conflict) for r in results) == THREADS - 1, results
    assert PolicySetting.objects.values_list("policy", "version").get() == ("cost", 3)


@pytest.mark.django_db(transaction=True)
def test_the_same_approved_decision_applied_at_once_is_applied_once(transactional_db):
    recipe_create(name="tiny-cpu", policy="cost")
    author = grant(User.objects.create_user("alice"), "propose_decision")
    reviewer = grant(User.objects.create_user("bob"), "approve_decision")
    appliers = [grant(User.objects.create_user(f"ap-{i}"), "apply_decision") for i in range(4)]
    decision = decisions.decision_approve(
        actor=reviewer,
        decision=decisions.decision_propose(actor=author, recipe="tiny-cpu", policy="rule", rationale="PR #22"),
    )
    results = all_at_once([lambda u=u: decisions.decision_apply(actor=u, decision=decision) for u in appliers])
    assert sum(not isinstance(r, Exception) for r in results) == 1
    assert all(isinstance(r, Conflict) and r.field == "status" for r in results if isinstance(r, Exception))
    assert PolicySetting.objects.values_list("policy", "version").get() == ("rule", 2)
    assert AuditEvent.objects.filter(action="applied").count() == 1


def test_a_rollback_after_the_policy_moved_is_409_and_changes_nothing(bad_policy_applied):
    policy_set(recipe=bad_policy_applied, policy="cost", reason="a decision applied meanwhile")  # v3
    with pytest.raises(Conflict) as exc:
        policy_rollback_emergency(recipe=bad_policy_applied, actor=operator(), reason="incident", from_version=2)
    assert exc.value.field == "from_version" and "is at v3 (cost), not v2" in exc.value.message
    setting = PolicySetting.objects.get()
    assert (setting.policy, setting.version, setting.emergency) == ("cost", 3, None)
    assert not AuditEvent.objects.filter(action="emergency_rollback").exists()


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"reason": "incident"}, 400, "from_version"),
        ({"reason": "incident", "from_version": "two"}, 400, "from_version"),
        ({"reason": "incident", "from_version": 0}, 400, "from_version"),
        ({"reason": "incident", "from_version": 1}, 409, "from_version"),
        ({"reason": "incident", "from_version": 3}, 409, "from_version"),
    ],
)
def test_the_api_rollback_needs_the_current_version(bad_policy_applied, body, status, field):
    client = Client()
    client.force_login(operator())
    response = client.post("/api/recipes/tiny-cpu/rollback/", body, content_type=JSON)
    assert (response.status_code, response.json()["field"]) == (status, field)
    assert PolicySetting.objects.values_list("policy", "version").get() == ("rule", 2)


def test_the_page_sends_the_version_it_saw_and_a_stale_form_is_refused(bad_policy_applied):
    client = Client()
    client.force_login(operator())
    page = client.get("/recipes/tiny-cpu").content.decode()
    assert '<input type="hidden" name="from_version" value="2">' in page
    assert client.post("/recipes/tiny-cpu/rollback", {"reason": "incident", "from_version": "2"}).status_code == 302
    again = client.post("/recipes/tiny-cpu/rollback", {"reason": "incident", "from_version": "2"})  # a double click
    assert again.status_code == 409 and "olga rolled it back already" in again.content.decode()
    assert PolicySetting.objects.values_list("policy", "version").get() == ("cost", 3)


def test_the_banner_is_made_from_the_audit_event(bad_policy_applied):
    setting = policy_rollback_emergency(recipe=bad_policy_applied, actor=operator(), reason="incident", from_version=2)
    event = AuditEvent.objects.get(action="emergency_rollback")
    assert setting.emergency == {
        "by": "olga",
        "at": event.created_at.isoformat(),
        "reason": "incident",
        "version": 3,
        "from_policy": "rule",
    }


@pytest.mark.django_db(transaction=True)
def test_a_recipes_engine_started_or_stopped_at_once_is_started_and_stopped_once(bad_policy_applied, queued):
    from heliosweb.jobs.models import BenchmarkJob
    from heliosweb.simengine.services import engine_start, engine_stop

    starters = []
    for i in range(4):
        user = User.objects.create_user(f"m-{i}")
        user.user_permissions.add(Permission.objects.get(codename="run_jobs"))
        starters.append(User.objects.get(pk=user.pk))
    started = all_at_once([lambda u=u: engine_start(recipe=bad_policy_applied, user=u) for u in starters])
    assert sum(isinstance(r, BenchmarkJob) for r in started) == 1
    assert all(isinstance(r, Conflict) and "already runs" in r.message for r in started if isinstance(r, Exception))
    assert BenchmarkJob.objects.filter(kind="engine").count() == 1 and len(queued) == 1
    BenchmarkJob.objects.filter(kind="engine").update(status="running")  # a worker took it
    stopped = all_at_once([lambda u=u: engine_stop(recipe=bad_policy_applied, user=u) for u in starters])
    assert sum(isinstance(r, BenchmarkJob) for r in stopped) == 1
    assert all(isinstance(r, Conflict) for r in stopped if isinstance(r, Exception)), stopped
    assert AuditEvent.objects.filter(action="engine_stopped").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("status", ["queued", "running"])
def test_a_job_cancelled_at_once_is_cancelled_once(bad_policy_applied, status):
    from heliosweb.jobs.models import BenchmarkJob
    from heliosweb.jobs.services.submission import job_cancel

    job = BenchmarkJob.objects.create(kind="pr22", queue="sim", recipe=bad_policy_applied, status=status)
    results = all_at_once([lambda: job_cancel(job=BenchmarkJob.objects.get(pk=job.pk)) for _ in range(4)])
    assert sum(isinstance(r, BenchmarkJob) for r in results) == 1
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(refused) == 3 and all(getattr(r, "field", None) == "status" for r in refused), refused
    assert AuditEvent.objects.filter(action="job_cancelled").count() == 1
    job.refresh_from_db()
    assert (job.status, job.cancel_requested) == (("cancelled", False) if status == "queued" else ("running", True))
