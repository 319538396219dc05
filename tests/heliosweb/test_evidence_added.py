"""A reviewer who may approve cites further jobs before approving: the evidence is what the proposer
cites and what an approver adds. The addition is audited (its digests taken when cited, checked by
audit_verify), shown as "added by" on the decision page, and refused with a 4xx naming the field,
storing nothing, through the service, the API and the page's form."""

from __future__ import annotations

import pytest
from django.db import connection
from rest_framework.test import APIClient

from heliosweb.audit.models import AuditEvent
from heliosweb.common.errors import Conflict, Forbidden
from heliosweb.decisions import services
from heliosweb.decisions.selectors import audit_verify
from heliosweb.jobs.models import BenchmarkJob
from scheduler_core.errors import InvalidInput

from .test_decisions import propose


@pytest.fixture
def more_job(recipe):
    return BenchmarkJob.objects.create(kind="pr22", queue="sim", recipe=recipe, status="done", result={"arms": []})


def _events(decision):
    return AuditEvent.objects.filter(object_type="decision", object_id=str(decision.pk)).order_by("seq")


def test_a_reviewer_adds_a_job_and_the_chain_records_it_with_its_digest(author, reviewer, recipe, done_job, more_job):
    decision = propose(author, evidence=[done_job.pk])
    services.decision_add_evidence(actor=reviewer, decision=decision, evidence=[more_job.pk])
    assert sorted(decision.evidence.values_list("pk", flat=True)) == [done_job.pk, more_job.pk]
    event = _events(decision).last()
    assert (event.action, event.actor_name) == ("evidence_added", "bob")
    assert event.before["evidence"] == [done_job.pk]
    assert event.after["evidence"] == sorted([done_job.pk, more_job.pk]) and event.after["added"] == [more_job.pk]
    assert set(event.after["evidence_digests"]) == {str(more_job.pk)}
    assert audit_verify(evidence=True).ok, audit_verify(evidence=True).reason
    services.decision_approve(actor=reviewer, decision=decision, reason="with the job I added")
    assert audit_verify(evidence=True).ok


def test_an_added_job_edited_afterwards_is_named_by_audit_verify(author, reviewer, recipe, done_job, more_job):
    decision = propose(author, evidence=[done_job.pk])
    services.decision_add_evidence(actor=reviewer, decision=decision, evidence=[more_job.pk])
    BenchmarkJob.objects.filter(pk=more_job.pk).update(result={"arms": [{"edited": True}]})
    report = audit_verify(evidence=True)
    assert not report.ok and f"evidence job {more_job.pk}" in report.reason, report.reason


def test_an_added_job_unlinked_by_raw_sql_fails_audit_verify(author, reviewer, recipe, done_job, more_job):
    decision = propose(author, evidence=[done_job.pk])
    services.decision_add_evidence(actor=reviewer, decision=decision, evidence=[more_job.pk])
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM decisions_policydecision_evidence WHERE benchmarkjob_id = %s", [more_job.pk])
    report = audit_verify()
    assert not report.ok and f"decision {decision.pk}: evidence is [{done_job.pk}]" in report.reason, report.reason


@pytest.mark.parametrize(
    ("evidence", "field", "message"),
    [
        (None, "evidence", "required"),
        ([], "evidence", "required"),
        ("7", "evidence", "list of job ids"),
        (["x"], "evidence[0]", "not a job id"),
        ([999_999], "evidence[0]", "no job 999999"),
        ("cited", "evidence[1]", "already cited"),
        ("running", "evidence[0]", "only a finished (done) job is evidence"),
    ],
)
def test_bad_evidence_is_refused_naming_the_field_and_nothing_is_stored(
    author, reviewer, recipe, done_job, more_job, evidence, field, message
):
    decision = propose(author, evidence=[done_job.pk])
    if evidence == "cited":
        evidence = [more_job.pk, done_job.pk]
    elif evidence == "running":
        evidence = [BenchmarkJob.objects.create(kind="pr22", queue="sim", recipe=recipe, status="running").pk]
    before = _events(decision).count()
    with pytest.raises(InvalidInput) as caught:
        services.decision_add_evidence(actor=reviewer, decision=decision, evidence=evidence)
    assert caught.value.field == field and message in caught.value.message
    assert list(decision.evidence.values_list("pk", flat=True)) == [done_job.pk]
    assert _events(decision).count() == before


def test_only_a_reviewer_of_a_pending_decision_may_add(author, reviewer, applier, recipe, done_job, more_job):
    decision = propose(author, evidence=[done_job.pk])
    for who in (author, applier):  # the author's evidence is the proposal's; an applier may not approve
        with pytest.raises(Forbidden):
            services.decision_add_evidence(actor=who, decision=decision, evidence=[more_job.pk])
    services.decision_approve(actor=reviewer, decision=decision)
    with pytest.raises(Conflict, match="only a pending decision"):
        services.decision_add_evidence(actor=reviewer, decision=decision, evidence=[more_job.pk])
    assert list(decision.evidence.values_list("pk", flat=True)) == [done_job.pk]


def test_the_api_adds_evidence_and_refuses_bad_input_with_the_field(author, reviewer, recipe, done_job, more_job):
    decision = propose(author, evidence=[done_job.pk])
    api = APIClient()
    api.force_authenticate(reviewer)
    url = f"/api/decisions/{decision.pk}/evidence/"
    bad = api.post(url, {"evidence": [done_job.pk]}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "evidence[0]", bad.json()
    assert api.post(url, {"jobs": [more_job.pk]}, format="json").json()["field"] == "jobs"
    api.force_authenticate(author)
    assert api.post(url, {"evidence": [more_job.pk]}, format="json").status_code == 403
    api.force_authenticate(reviewer)
    ok = api.post(url, {"evidence": [more_job.pk]}, format="json")
    assert ok.status_code == 200 and ok.json()["evidence"] == [done_job.pk, more_job.pk]


def test_the_page_offers_the_form_to_a_reviewer_and_says_who_added_each_job(
    client, author, reviewer, recipe, done_job, more_job
):
    decision = propose(author, evidence=[done_job.pk])
    client.force_login(author)
    assert 'id="add-evidence"' not in client.get(f"/decisions/{decision.pk}").content.decode()
    client.force_login(reviewer)
    page = client.get(f"/decisions/{decision.pk}").content.decode()
    assert 'id="add-evidence"' in page and f'<option value="{more_job.pk}"' in page
    assert f'<option value="{done_job.pk}"' not in page.split('id="add-evidence"')[1].split("</form>")[0]
    refused = client.post(f"/decisions/{decision.pk}/evidence", {"evidence": ["abc"]})
    body = refused.content.decode()
    assert refused.status_code == 400 and 'id="error-evidence"' in body and 'data-field="evidence[0]"' in body
    assert decision.evidence.count() == 1
    done = client.post(f"/decisions/{decision.pk}/evidence", {"evidence": [str(more_job.pk)]})
    assert done.status_code == 302
    page = client.get(f"/decisions/{decision.pk}").content.decode()
    row = page.split(f'<li data-job="{more_job.pk}">')[1].split("</li>")[0]
    assert "added by bob" in row
    assert "cited by alice" in page.split(f'<li data-job="{done_job.pk}">')[1].split("</li>")[0]
