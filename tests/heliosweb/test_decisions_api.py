"""Decisions over HTTP: the JSON API (Bearer token and session) and the pages (CSRF, permissions)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from heliosweb.audit.models import AuditEvent
from heliosweb.decisions import services
from heliosweb.decisions.models import PolicyDecision
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.recipes.models import PolicySetting
from heliosweb.telemetry.tokens import user_token_issue

from .test_audit import guard_dropped
from .test_decisions import RATIONALE


def bearer(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {user_token_issue(user=user, rotate=True)}")
    return client


def session(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def propose(author: User) -> PolicyDecision:
    return services.decision_propose(actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE)


def nothing_stored() -> bool:
    return PolicyDecision.objects.count() == 0 and AuditEvent.objects.filter(object_type="decision").count() == 0


# --- API ------------------------------------------------------------------------------------


def test_the_api_runs_the_whole_workflow_with_bearer_tokens(author, reviewer, recipe, done_job):
    alice, bob = bearer(author), bearer(reviewer)
    created = alice.post(
        "/api/decisions/",
        {"recipe": "tiny-cpu", "policy": "rule", "rationale": RATIONALE, "evidence": [done_job.pk]},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["status"], body["from_policy"], body["to_policy"], body["base_version"], body["evidence"]) == (
        "pending",
        "cost",
        "rule",
        1,
        [done_job.pk],
    )
    url = f"/api/decisions/{body['id']}/"
    assert bob.post(url + "approve/", {"reason": "trade accepted"}, format="json").json()["status"] == "approved"
    applied = alice.post(url + "apply/", {}, format="json").json()
    assert (applied["status"], applied["applied_version"], applied["applied_by"]) == ("applied", 2, "alice")
    assert (
        alice.get("/api/recipes/tiny-cpu/policy").json().items()
        >= {"recipe": "tiny-cpu", "policy": "rule", "version": 2}.items()
    )
    assert [d["id"] for d in bob.get("/api/decisions/?status=applied").json()] == [body["id"]]
    assert bob.get("/api/decisions/?status=pending").json() == []
    audit = bob.get("/api/decisions/audit/").json()
    grants = AuditEvent.objects.filter(action="privileges_changed").count()  # alice's and bob's permissions
    # and the two tokens issued
    assert (audit["verified"], audit["count"] - grants, audit["broken_at"]) == (True, 7, None)
    actions = ["recipe_created", "token_created", "token_created", "proposed", "approved", "policy_changed", "applied"]
    assert [e["action"] for e in audit["events"] if e["action"] != "privileges_changed"] == actions
    assert audit["head_hash"] == audit["events"][-1]["hash"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"policy": "rule", "rationale": RATIONALE}, "recipe"),
        ({"recipe": "ghost", "policy": "rule", "rationale": RATIONALE}, "recipe"),
        ({"recipe": "tiny-cpu", "policy": "rule-v1", "rationale": RATIONALE}, "policy"),
        ({"recipe": "tiny-cpu", "policy": "cost", "rationale": RATIONALE}, "policy"),
        ({"recipe": "tiny-cpu", "policy": "rule", "rationale": ""}, "rationale"),
        ({"recipe": "tiny-cpu", "policy": "rule", "rationale": RATIONALE, "evidence": "7"}, "evidence"),
        ({"recipe": "tiny-cpu", "policy": "rule", "rationale": RATIONALE, "evidence": [12345]}, "evidence[0]"),
        ({"recipe": "tiny-cpu", "policy": "rule", "rationale": RATIONALE, "approver": "bob"}, "approver"),
        ([1, 2], "body"),
    ],
)
def test_api_bad_input_answers_400_naming_the_field_and_stores_nothing(author, recipe, body, field):
    response = bearer(author).post("/api/decisions/", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert nothing_stored()


def test_api_evidence_that_has_not_finished_is_refused(author, recipe):
    running = BenchmarkJob.objects.create(kind="pr22", queue="sim", status="running")
    response = bearer(author).post(
        "/api/decisions/",
        {"recipe": "tiny-cpu", "policy": "rule", "rationale": RATIONALE, "evidence": [running.pk]},
        format="json",
    )
    assert (response.status_code, response.json()["field"]) == (400, "evidence[0]")
    assert nothing_stored()


def test_api_an_author_approving_their_own_proposal_gets_403(reviewer, recipe):
    decision = propose(reviewer)
    response = bearer(reviewer).post(f"/api/decisions/{decision.pk}/approve/", {}, format="json")
    assert (response.status_code, response.json()["field"]) == (403, "actor")
    assert (
        PolicyDecision.objects.get().status == "pending"
        and AuditEvent.objects.filter(object_type="decision").count() == 1
    )


def test_api_steps_need_their_permissions(author, applier, viewer, recipe):
    assert (
        bearer(viewer)
        .post("/api/decisions/", {"recipe": "tiny-cpu", "policy": "rule", "rationale": RATIONALE}, format="json")
        .status_code
        == 403
    )
    decision = propose(author)
    assert bearer(applier).post(f"/api/decisions/{decision.pk}/approve/", {}, format="json").status_code == 403
    assert bearer(viewer).post(f"/api/decisions/{decision.pk}/withdraw/", {}, format="json").status_code == 403
    assert (
        PolicyDecision.objects.get().status == "pending"
        and AuditEvent.objects.filter(object_type="decision").count() == 1
    )


def test_api_applying_a_stale_proposal_answers_409_and_changes_nothing(author, reviewer, recipe):
    first, second = propose(author), propose(author)
    for d in (first, second):
        services.decision_approve(actor=reviewer, decision=d)
    services.decision_apply(actor=author, decision=first)
    response = bearer(author).post(f"/api/decisions/{second.pk}/apply/", {}, format="json")
    assert (response.status_code, response.json()["field"]) == (409, "base_version")
    assert PolicySetting.objects.get(recipe=recipe).version == 2
    assert PolicyDecision.objects.get(pk=second.pk).status == "approved"


def test_api_reject_without_a_reason_answers_400(author, reviewer, recipe):
    decision = propose(author)
    response = bearer(reviewer).post(f"/api/decisions/{decision.pk}/reject/", {"reason": ""}, format="json")
    assert (response.status_code, response.json()["field"]) == (400, "reason")
    assert PolicyDecision.objects.get().status == "pending"


def test_api_needs_authentication(db, recipe):
    client = APIClient()
    assert client.get("/api/decisions/").status_code in (401, 403)
    assert client.post(
        "/api/decisions/", {"recipe": "tiny-cpu", "policy": "rule", "rationale": "x"}, format="json"
    ).status_code in (401, 403)
    assert client.get("/api/decisions/audit/").status_code in (401, 403)
    assert nothing_stored()


def test_api_unknown_ids_and_filters_name_the_field(author, recipe):
    api = bearer(author)
    response = api.get("/api/decisions/999/")
    assert (response.status_code, response.json()["field"]) == (404, "id")
    assert api.post("/api/decisions/999/apply/", {}, format="json").status_code == 404
    assert api.get(f"/api/decisions/{10**30}/").status_code == 404  # past a 64-bit key: still a 404, never a 500
    response = api.get("/api/decisions/?status=maybe")
    assert (response.status_code, response.json()["field"]) == (400, "status")
    assert api.get("/api/decisions/audit/?limit=lots").json()["field"] == "limit"


def test_api_audit_reports_where_the_chain_breaks(author, reviewer, recipe):
    decision = propose(author)
    services.decision_approve(actor=reviewer, decision=decision)
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET recipe_name = %s WHERE seq = 1", ["other"])  # the recipe's creation
    audit = bearer(author).get("/api/decisions/audit/").json()
    assert (audit["verified"], audit["broken_at"], audit["count"]) == (False, 1, 0)


# --- pages ----------------------------------------------------------------------------------


def test_decision_pages_need_a_login(db):
    for url in ("/decisions/", "/decisions/new", "/decisions/1"):
        response = Client().get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_only_maintainers_who_may_propose_can_open_the_form(viewer, author, recipe, done_job):
    assert session(viewer).get("/decisions/new").status_code == 403
    page = session(author).get("/decisions/new")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="csrfmiddlewaretoken"' in html and f'value="{done_job.pk}"' in html and "rule-v1" not in html


def test_the_form_refuses_a_post_without_a_csrf_token(author, recipe):
    response = session(author, csrf=True).post(
        "/decisions/new", {"recipe": "tiny-cpu", "policy": "rule", "rationale": "x"}
    )
    assert response.status_code == 403
    assert nothing_stored()


@pytest.mark.parametrize(
    "form, field",
    [
        ({"recipe": "", "policy": "rule", "rationale": RATIONALE}, "recipe"),
        ({"recipe": "tiny-cpu", "policy": "rule-v1", "rationale": RATIONALE}, "policy"),
        ({"recipe": "tiny-cpu", "policy": "cost", "rationale": RATIONALE}, "policy"),
        ({"recipe": "tiny-cpu", "policy": "rule", "rationale": "  "}, "rationale"),
        ({"recipe": "tiny-cpu", "policy": "rule", "rationale": RATIONALE, "evidence": ["999"]}, "evidence"),
    ],
)
def test_a_bad_form_shows_the_field_error_and_stores_nothing(author, recipe, form, field):
    response = session(author).post("/decisions/new", form)
    assert response.status_code == 400
    assert f'data-field="{field}"' in response.content.decode()
    assert nothing_stored()


def test_a_good_form_proposes_and_opens_the_decision_page(author, recipe, done_job):
    response = session(author).post(
        "/decisions/new",
        {"recipe": "tiny-cpu", "policy": "rule", "rationale": RATIONALE, "evidence": [str(done_job.pk)]},
    )
    decision = PolicyDecision.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/decisions/{decision.pk}"
    assert list(decision.evidence.all()) == [done_job]


def test_the_detail_page_offers_each_viewer_only_their_steps(author, reviewer, applier, recipe, done_job):
    decision = services.decision_propose(
        actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE, evidence=[done_job.pk]
    )

    def steps(user: User) -> set[str]:
        html = session(user).get(f"/decisions/{decision.pk}").content.decode()
        return {s for s in ("approve", "reject", "withdraw", "apply") if f'data-step="{s}"' in html}

    page = session(author).get(f"/decisions/{decision.pk}").content.decode()
    assert f'href="/jobs/{done_job.pk}"' in page and "cost" in page and "rule" in page
    assert steps(author) == {"withdraw"}
    assert steps(reviewer) == {"approve", "reject"}
    assert steps(applier) == set()
    services.decision_approve(actor=reviewer, decision=decision)
    assert steps(author) == {"apply"} and steps(applier) == {"apply"} and steps(reviewer) == set()


def test_approving_and_applying_from_the_pages(author, reviewer, recipe):
    decision = propose(author)
    response = session(reviewer).post(f"/decisions/{decision.pk}/approve", {"reason": "fine"})
    assert response.status_code == 302
    session(author).post(f"/decisions/{decision.pk}/apply", {})
    assert PolicyDecision.objects.get().status == "applied"
    assert PolicySetting.objects.get(recipe=recipe).version == 2
    page = session(author).get(f"/decisions/{decision.pk}").content.decode()
    assert "Approved by bob" in page and "Applied by alice" in page  # the review stays a review once applied


def test_an_author_approving_from_the_page_is_refused_and_nothing_changes(reviewer, recipe):
    decision = propose(reviewer)
    response = session(reviewer).post(f"/decisions/{decision.pk}/approve", {})
    assert response.status_code == 403
    assert "cannot be approved by its author" in response.content.decode()
    assert (
        PolicyDecision.objects.get().status == "pending"
        and AuditEvent.objects.filter(object_type="decision").count() == 1
    )


def test_steps_are_post_only_and_unknown_steps_are_404(author, recipe):
    decision = propose(author)
    client = session(author)
    assert client.get(f"/decisions/{decision.pk}/withdraw").status_code == 405
    assert client.post(f"/decisions/{decision.pk}/explode").status_code == 404
    assert client.get("/decisions/999").status_code == 404
    assert PolicyDecision.objects.get().status == "pending"


def test_the_list_filters_by_status_and_shows_the_chain_badge(author, reviewer, recipe):
    kept, withdrawn = propose(author), propose(author)
    services.decision_withdraw(actor=author, decision=withdrawn)
    client = session(reviewer)
    html = client.get("/decisions/?status=pending").content.decode()
    listed = html.split('id="decisions"')[1].split("</table>")[0]
    assert f'href="/decisions/{kept.pk}"' in listed and f'href="/decisions/{withdrawn.pk}"' not in listed
    # the recipe created, two proposals, a withdrawal (and the grants of the users' permissions)
    assert f"chain verified ({4 + AuditEvent.objects.filter(action='privileges_changed').count()} events)" in html
    assert client.get("/decisions/?status=maybe").status_code == 400
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET reason = %s WHERE seq = 2", ["edited"])
    assert "chain broken at #2" in client.get("/decisions/").content.decode()


def test_the_decision_page_shows_each_evidence_jobs_numbers(author, reviewer, recipe, transactional_db):
    from heliosweb.jobs.services.runner import job_run
    from heliosweb.jobs.services.submission import job_create

    job = job_create(kind="pr22", recipe="tiny-cpu", user=author)
    job_run(job_id=job.pk)
    decision = services.decision_propose(
        actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE, evidence=[job.pk]
    )
    html = session(reviewer).get(f"/decisions/{decision.pk}").content.decode()
    assert f'href="/jobs/{job.pk}"' in html
    assert "9 launches 238.10 ms" in html and "4 launches 232.10 ms" in html  # the reviewer reads the evidence here
