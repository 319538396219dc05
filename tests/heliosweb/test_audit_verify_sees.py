"""Issue 30: `audit_verify` (the command: `evidence=True`) sees what a decision rests on. Each test edits one thing outside the
product (a queryset update or raw SQL, as a database console would) and expects the check to fail
naming it: an evidence job's result, a boot that job cites, a comment, who set a policy and what
it was before, and a privilege granted without the admin (the product's own ways, the admin or
`user_permissions.add`, are audited and pass)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection

from heliosweb.audit.models import AuditEvent
from heliosweb.catalogs.models import Boot
from heliosweb.catalogs.services import boot_create
from heliosweb.decisions import services
from heliosweb.decisions.models import DecisionComment
from heliosweb.decisions.selectors import audit_verify
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.recipes.models import PolicySetting

pytestmark = pytest.mark.django_db

GRAPHS = [{"prefill": 64, "decode": 0, "ms": 1.0}, {"prefill": 128, "decode": 0, "ms": 2.0}]


@pytest.fixture
def cited(recipe, author):
    """A pending decision citing a done job whose catalog came from a stored boot."""
    boot = boot_create(recipe=recipe, catalog=GRAPHS, provenance={"device": "cpu"})
    job = BenchmarkJob.objects.create(
        kind="simulate",
        queue="sim",
        recipe=recipe,
        status="done",
        result={"ttft_p99_ms": 41.2},
        catalog_sources={"boot_catalog": [{"boot": boot.pk, "repaired": False}]},
    )
    decision = services.decision_propose(
        actor=author, recipe="tiny-cpu", policy="rule", rationale="r", evidence=[job.pk]
    )
    assert audit_verify(evidence=True).ok, audit_verify(evidence=True).reason
    return decision, job, boot


def failed(*words: str) -> str:
    report = audit_verify(evidence=True)
    assert not report.ok, "audit_verify passed"
    for word in words:
        assert word in report.reason, report.reason
    return report.reason


def test_an_evidence_jobs_result_edited_after_it_was_cited_is_named(cited):
    decision, job, _ = cited
    BenchmarkJob.objects.filter(pk=job.pk).update(result={"ttft_p99_ms": 12.0})  # the numbers the reviewer reads
    failed(f"decision {decision.pk}: evidence job {job.pk}", "changed")


def test_a_boot_the_evidence_cites_edited_after_is_named(cited):
    decision, job, boot = cited
    Boot.objects.filter(pk=boot.pk).update(catalog=[{**GRAPHS[0], "ms": 0.5}, GRAPHS[1]])
    failed(f"evidence job {job.pk}", "a boot it cites")


def test_a_comment_edited_or_slipped_in_is_named(cited, author):
    decision, _, _ = cited
    author.user_permissions.add(Permission.objects.get(codename="comment_decision"))
    author = User.objects.get(pk=author.pk)  # permissions are cached on the instance
    comment = services.decision_comment(actor=author, decision=decision, body="looks right")
    assert audit_verify(evidence=True).ok
    DecisionComment.objects.filter(pk=comment.pk).update(body="approved by the CTO")
    failed(f"comment {comment.pk} on decision {decision.pk} differs")
    DecisionComment.objects.filter(pk=comment.pk).update(body="looks right")
    assert audit_verify(evidence=True).ok
    slipped = DecisionComment.objects.create(decision=decision, author=author, body="no event")
    failed(f"comment {slipped.pk}", "has no commented event")


def test_who_changed_a_policy_and_what_it_was_before_are_checked(recipe, author):
    from heliosweb.recipes.services import policy_set

    policy_set(recipe=recipe, policy="rule", user=author, reason="r")
    assert audit_verify(evidence=True).ok
    other = User.objects.create_user("mallory")
    PolicySetting.objects.filter(recipe=recipe).update(updated_by=other)
    failed("updated_by", f"user {other.pk}")
    PolicySetting.objects.filter(recipe=recipe).update(updated_by=author, previous_policy="rule")
    failed("previous_policy is 'rule'", "says 'cost'")


def test_grants_through_the_relations_are_audited_and_raw_sql_grants_are_named(db):
    user = User.objects.create_user("erin")
    group = Group.objects.create(name="incident-team")
    apply = Permission.objects.get(codename="apply_decision")
    user.user_permissions.add(apply)  # a shell, a command: not the admin
    group.permissions.add(Permission.objects.get(codename="run_jobs"))
    group.user_set.add(user)  # from the group's side
    events = AuditEvent.objects.filter(action="privileges_changed", object_type="user", object_id=str(user.pk))
    assert events.order_by("-seq").first().after == {
        "superuser": False,
        "groups": ["incident-team"],
        "permissions": ["decisions.apply_decision"],
    }
    assert audit_verify(evidence=True).ok
    group.user_set.clear()
    assert audit_verify(evidence=True).ok and events.order_by("-seq").first().after["groups"] == []

    propose = Permission.objects.get(codename="propose_decision")
    with connection.cursor() as cursor:  # around Django: no signal
        cursor.execute(
            "INSERT INTO auth_user_user_permissions (user_id, permission_id) VALUES (%s, %s)", [user.pk, propose.pk]
        )
    failed("user erin's privileges differ", "+decisions.propose_decision")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM auth_user_user_permissions WHERE permission_id = %s", [propose.pk])
        cursor.execute("UPDATE auth_user SET is_superuser = %s WHERE id = %s", [True, user.pk])
    failed("user erin's privileges differ", "superuser True")
    User.objects.filter(pk=user.pk).update(is_superuser=False)
    approve = Permission.objects.get(codename="approve_decision")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO auth_group_permissions (group_id, permission_id) VALUES (%s, %s)", [group.pk, approve.pk]
        )
    failed("group incident-team's privileges differ", "+decisions.approve_decision")


def test_a_superuser_made_by_create_superuser_is_audited(db):
    User.objects.create_superuser("root", password="pw-root-123")
    assert AuditEvent.objects.filter(action="privileges_changed", after__superuser=True).exists()
    assert audit_verify(evidence=True).ok
