"""Policy decisions: the workflow's rules, the append-only audit trail and its hash chain."""

from __future__ import annotations

import asyncio
import io

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.test import APIClient

from heliosweb.audit.models import AuditEvent
from heliosweb.audit.selectors import chain_verify
from heliosweb.common.errors import Conflict, Forbidden
from heliosweb.decisions import services
from heliosweb.decisions.models import PolicyDecision
from heliosweb.decisions.selectors import audit_verify
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.recipes.models import PolicySetting
from scheduler_core.errors import InvalidInput

from .conftest import grant
from .test_audit import guard_dropped

RATIONALE = "PR #22: one launch instead of three, boot-invariant; jobs attached."


def propose(author: User, policy: str = "rule", **kw) -> PolicyDecision:
    return services.decision_propose(
        actor=author, recipe=kw.pop("recipe", "tiny-cpu"), policy=policy, rationale=kw.pop("rationale", RATIONALE), **kw
    )


def decision_events():
    """The decisions' steps in the one audit chain (recipes and policy changes write their own)."""
    return AuditEvent.objects.filter(object_type="decision").order_by("seq")


def setting(recipe) -> PolicySetting:
    return PolicySetting.objects.get(recipe=recipe)


# --- proposing ------------------------------------------------------------------------------


def test_a_proposal_records_the_current_policy_and_version_and_links_its_evidence(author, recipe, done_job):
    decision = propose(author, evidence=[done_job.pk])
    assert (decision.status, decision.from_policy, decision.to_policy, decision.base_version) == (
        "pending",
        "cost",
        "rule",
        1,
    )
    assert list(decision.evidence.all()) == [done_job]
    assert (setting(recipe).policy, setting(recipe).version) == ("cost", 1)  # proposing changes nothing yet


def test_rule_v1_can_never_be_proposed(author, recipe):
    with pytest.raises(InvalidInput) as exc:
        propose(author, policy="rule-v1")
    assert exc.value.field == "policy" and "never" in exc.value.message
    assert PolicyDecision.objects.count() == 0 and decision_events().count() == 0


def test_rule_v1_can_never_be_applied_even_if_a_row_says_so(author, reviewer, recipe):
    decision = PolicyDecision.objects.create(
        recipe=recipe,
        from_policy="cost",
        to_policy="rule-v1",
        base_version=1,
        rationale="forged",
        created_by=author,
        status="approved",
        reviewed_by=reviewer,
    )
    with pytest.raises(InvalidInput) as exc:
        services.decision_apply(actor=author, decision=decision)
    assert exc.value.field == "policy"
    assert (setting(recipe).policy, setting(recipe).version) == ("cost", 1)
    assert PolicyDecision.objects.get().status == "approved" and decision_events().count() == 0


@pytest.mark.parametrize("policy", ["", None, "greedy", 3])
def test_an_unknown_policy_is_refused_naming_the_field(author, recipe, policy):
    with pytest.raises(InvalidInput) as exc:
        propose(author, policy=policy)
    assert exc.value.field == "policy" and PolicyDecision.objects.count() == 0


def test_the_new_policy_must_differ_from_the_current_one(author, recipe):
    with pytest.raises(InvalidInput) as exc:
        propose(author, policy="cost")
    assert exc.value.field == "policy" and "already" in exc.value.message
    assert PolicyDecision.objects.count() == 0


@pytest.mark.parametrize("rationale", ["", "   \n", None, 42])
def test_a_proposal_needs_a_rationale(author, recipe, rationale):
    with pytest.raises(InvalidInput) as exc:
        propose(author, rationale=rationale)
    assert exc.value.field == "rationale" and PolicyDecision.objects.count() == 0


def test_an_unknown_recipe_is_refused(author, recipe):
    with pytest.raises(InvalidInput) as exc:
        propose(author, recipe="ghost")
    assert exc.value.field == "recipe" and PolicyDecision.objects.count() == 0


@pytest.mark.parametrize("status", ["queued", "running", "failed", "cancelled"])
def test_evidence_must_be_a_finished_job(author, recipe, done_job, status):
    other = BenchmarkJob.objects.create(kind="pr22", queue="sim", status=status)
    with pytest.raises(InvalidInput) as exc:
        propose(author, evidence=[done_job.pk, other.pk])
    assert exc.value.field == "evidence[1]" and status in exc.value.message
    assert PolicyDecision.objects.count() == 0 and decision_events().count() == 0


@pytest.mark.parametrize(
    "evidence, field",
    [
        ([999], "evidence[0]"),
        (["abc"], "evidence[0]"),
        ([True], "evidence[0]"),
        ("1,2", "evidence"),
        ([10**30], "evidence[0]"),
        ([0], "evidence[0]"),
        ({"id": 1}, "evidence"),
        (7, "evidence"),
    ],
)
def test_evidence_must_be_a_list_of_existing_job_ids(author, recipe, evidence, field):
    with pytest.raises(InvalidInput) as exc:
        propose(author, evidence=evidence)
    assert exc.value.field == field and PolicyDecision.objects.count() == 0


# --- who may do what ------------------------------------------------------------------------


def test_proposing_needs_the_propose_permission(viewer, recipe):
    with pytest.raises(Forbidden):
        propose(viewer)
    assert PolicyDecision.objects.count() == 0


def test_an_author_cannot_approve_their_own_proposal(reviewer, recipe):
    decision = propose(reviewer)  # bob may approve others' decisions, but not his own
    with pytest.raises(Forbidden) as exc:
        services.decision_approve(actor=reviewer, decision=decision)
    assert "author" in exc.value.message
    assert PolicyDecision.objects.get().status == "pending"
    assert list(decision_events().values_list("action", flat=True)) == ["proposed"]


def test_approving_needs_the_approve_permission(author, applier, recipe):
    decision = propose(author)
    with pytest.raises(Forbidden) as exc:
        services.decision_approve(actor=applier, decision=decision)
    assert "approve_decision" in exc.value.message
    assert PolicyDecision.objects.get().status == "pending"


def test_applying_needs_the_apply_permission_even_for_the_approver(author, reviewer, recipe):
    decision = services.decision_approve(actor=reviewer, decision=propose(author))
    with pytest.raises(Forbidden):
        services.decision_apply(actor=reviewer, decision=decision)
    assert (setting(recipe).policy, PolicyDecision.objects.get().status) == ("cost", "approved")


def test_only_an_approved_decision_can_be_applied(author, recipe):
    decision = propose(author)
    with pytest.raises(Conflict) as exc:
        services.decision_apply(actor=author, decision=decision)
    assert exc.value.field == "status"
    assert setting(recipe).policy == "cost"


def test_the_author_can_withdraw_a_pending_proposal_and_then_nobody_can_approve_it(author, reviewer, recipe):
    decision = services.decision_withdraw(actor=author, decision=propose(author), reason="numbers were stale")
    assert decision.status == "withdrawn"
    with pytest.raises(Conflict):
        services.decision_approve(actor=reviewer, decision=decision)
    assert PolicyDecision.objects.get().status == "withdrawn"


def test_only_the_author_can_withdraw(author, reviewer, recipe):
    with pytest.raises(Forbidden):
        services.decision_withdraw(actor=reviewer, decision=propose(author))
    assert PolicyDecision.objects.get().status == "pending"


def test_rejecting_needs_a_reason_and_ends_the_decision(author, reviewer, recipe):
    decision = propose(author)
    with pytest.raises(InvalidInput) as exc:
        services.decision_reject(actor=reviewer, decision=decision, reason=" ")
    assert exc.value.field == "reason" and PolicyDecision.objects.get().status == "pending"
    services.decision_reject(actor=reviewer, decision=decision, reason="fix the drift instead")
    with pytest.raises(Conflict):
        services.decision_apply(actor=author, decision=decision)
    assert PolicyDecision.objects.get().status == "rejected" and setting(recipe).policy == "cost"


# --- applying -------------------------------------------------------------------------------


def test_apply_bumps_the_version_and_the_policy_endpoint_shows_it(author, reviewer, applier, recipe):
    decision = services.decision_approve(actor=reviewer, decision=propose(author), reason="trade accepted")
    decision = services.decision_apply(actor=applier, decision=decision)
    assert (decision.status, decision.applied_version, decision.applied_by) == ("applied", 2, applier)
    assert (setting(recipe).policy, setting(recipe).version, setting(recipe).updated_by) == ("rule", 2, applier)
    api = APIClient()
    api.force_login(applier)
    policy = api.get("/api/recipes/tiny-cpu/policy").json()
    assert policy.items() >= {"recipe": "tiny-cpu", "policy": "rule", "version": 2, "decision": decision.pk}.items()


def test_applying_a_stale_proposal_fails_and_changes_nothing(author, reviewer, recipe):
    first = services.decision_approve(actor=reviewer, decision=propose(author))
    second = services.decision_approve(actor=reviewer, decision=propose(author, rationale="a duplicate, also on v1"))
    services.decision_apply(actor=author, decision=first)
    events = decision_events().count()
    with pytest.raises(Conflict) as exc:
        services.decision_apply(actor=author, decision=second)
    assert exc.value.field == "base_version" and "stale" in exc.value.message
    assert (setting(recipe).policy, setting(recipe).version) == ("rule", 2)
    assert PolicyDecision.objects.get(pk=second.pk).status == "approved"
    assert decision_events().count() == events


def test_a_decision_cannot_be_applied_twice(author, reviewer, recipe):
    decision = services.decision_apply(
        actor=author, decision=services.decision_approve(actor=reviewer, decision=propose(author))
    )
    with pytest.raises(Conflict):
        services.decision_apply(actor=author, decision=decision)
    assert setting(recipe).version == 2


# --- the audit trail (the chain itself: test_audit.py) ----------------------------------------


def test_every_step_appends_one_audit_event_with_actor_and_before_and_after(author, reviewer, recipe):
    decision = propose(author)
    services.decision_approve(actor=reviewer, decision=decision, reason="ok")
    services.decision_apply(actor=author, decision=decision, reason="rolling out")
    events = list(decision_events())
    assert [(e.action, e.actor_name, e.recipe_name, e.object_id) for e in events] == [
        ("proposed", "alice", "tiny-cpu", str(decision.pk)),
        ("approved", "bob", "tiny-cpu", str(decision.pk)),
        ("applied", "alice", "tiny-cpu", str(decision.pk)),
    ]
    assert events[0].reason == RATIONALE and events[1].reason == "ok"
    assert (events[0].before["status"], events[0].after["status"]) == (None, "pending")
    assert (events[1].before["status"], events[1].after["status"]) == ("pending", "approved")
    applied = events[2]
    assert {k: applied.before[k] for k in ("status", "policy", "version")} == {
        "status": "approved",
        "policy": "cost",
        "version": 1,
    }
    assert {k: applied.after[k] for k in ("status", "policy", "version")} == {
        "status": "applied",
        "policy": "rule",
        "version": 2,
    }
    # The policy change itself is recorded by the one write path, just before the step.
    change = AuditEvent.objects.get(action="policy_changed")
    assert change.seq == applied.seq - 1 and change.reason == f"decision #{decision.pk} applied"
    assert audit_verify().ok


def three_events(author: User, reviewer: User) -> None:
    decision = propose(author)
    services.decision_approve(actor=reviewer, decision=decision)
    services.decision_apply(actor=author, decision=decision)


def test_the_audit_verify_command_exits_non_zero_on_a_broken_chain(author, reviewer, recipe, capsys):
    three_events(author, reviewer)
    call_command("audit_verify")
    # the users' grants, recipe created, 3 steps, the policy change
    assert f"verified: {AuditEvent.objects.count()} events" in capsys.readouterr().out
    assert AuditEvent.objects.exclude(action="privileges_changed").count() == 5
    seq = AuditEvent.objects.get(action="proposed").seq
    with guard_dropped(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET after = %s WHERE seq = %s", ['{"policy": "cost"}', seq])
    with pytest.raises(CommandError, match=f"failed at #{seq}"):
        call_command("audit_verify")


def test_a_policy_changed_by_raw_sql_is_reported(author, reviewer, recipe):
    three_events(author, reviewer)
    assert audit_verify().ok
    with connection.cursor() as cursor:
        cursor.execute("UPDATE recipes_policysetting SET policy = 'cost', version = 3")
    report = audit_verify()
    assert not report.ok and report.broken_at is None
    assert report.reason == "recipe tiny-cpu is cost v3 but its last policy event says rule v2"
    with pytest.raises(CommandError, match="tiny-cpu is cost v3"):
        call_command("audit_verify")


def test_audit_verify_with_an_anchor_detects_events_cut_from_the_end(author, reviewer, recipe, tmp_path, capsys):
    anchors = tmp_path / "anchors.txt"
    three_events(author, reviewer)
    call_command("audit_verify", anchor=anchors)
    assert "anchored" in capsys.readouterr().out and len(anchors.read_text().splitlines()) == 1
    with guard_dropped(), connection.cursor() as cursor:  # someone with the database removes the last events
        cursor.execute(
            "DELETE FROM audit_auditevent WHERE seq >= %s", [AuditEvent.objects.get(action="policy_changed").seq]
        )
        cursor.execute(  # and covers the policy, who set it and what it was before
            "UPDATE recipes_policysetting SET policy = 'cost', version = 1, updated_by_id = NULL, previous_policy = ''"
        )
        cursor.execute(  # and the decision row the cut events described
            "UPDATE decisions_policydecision SET status = 'approved', applied_by_id = NULL, applied_version = NULL"
        )
    assert audit_verify(chain=chain_verify()).ok  # the shorter chain verifies on its own
    assert "is gone" in audit_verify().reason  # the pages start from the stored full walk, whose head was cut
    with pytest.raises(CommandError, match="cut from the end"):
        call_command("audit_verify", anchor=anchors)


# --- realtime -------------------------------------------------------------------------------


def test_each_step_is_pushed_to_the_recipes_group_after_commit(
    author, reviewer, recipe, django_capture_on_commit_callbacks
):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("recipes", channel)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        decision = propose(author)
    assert len(callbacks) == 1  # scheduled, not sent: nothing leaves before the commit
    callbacks[0]()
    message = async_to_sync(layer.receive)(channel)
    assert message == {
        "type": "recipes.decision",
        "action": "proposed",
        "seq": AuditEvent.objects.get(action="proposed").seq,
        "decision_id": decision.pk,
        "recipe": "tiny-cpu",
        "status": "pending",
        "actor": "alice",
        "policy": "cost",
        "version": 1,
        "proposed_policy": "rule",
    }


def test_an_unavailable_channel_layer_never_fails_the_decision(
    author, recipe, monkeypatch, django_capture_on_commit_callbacks, caplog
):
    class Down:
        async def group_send(self, group, message):
            await asyncio.sleep(0)
            raise ConnectionError("redis is down")

    monkeypatch.setattr("heliosweb.realtime.push.get_channel_layer", lambda: Down())
    with django_capture_on_commit_callbacks(execute=True):
        decision = propose(author)
    assert PolicyDecision.objects.get().pk == decision.pk and audit_verify().ok
    assert "could not send a recipes.decision message" in caplog.text


# --- demo data ------------------------------------------------------------------------------


def test_demo_setup_adds_a_second_maintainer_who_can_approve(db, monkeypatch, capsys, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only
    monkeypatch.setenv("HELIOS_DEMO_PASSWORD", "demo-pass-123")
    monkeypatch.setenv("HELIOS_DEMO_REVIEWER_PASSWORD", "demo-pass-456")
    call_command("demo_setup")
    maintainer, reviewer = User.objects.get(username="maintainer"), User.objects.get(username="reviewer")
    assert maintainer.has_perm("decisions.propose_decision") and maintainer.has_perm("decisions.apply_decision")
    assert not maintainer.has_perm("decisions.approve_decision")
    assert reviewer.has_perm("decisions.approve_decision") and reviewer.check_password("demo-pass-456")
    decision = services.decision_propose(actor=maintainer, recipe="tiny-cpu", policy="rule", rationale=RATIONALE)
    services.decision_apply(actor=maintainer, decision=services.decision_approve(actor=reviewer, decision=decision))
    assert PolicySetting.objects.get(recipe__name="tiny-cpu").version == 2


def test_demo_setup_sets_the_demo_password_only_when_it_creates_the_account(db, monkeypatch, settings):
    """A restart with HELIOS_DEMO_PASSWORD set must not re-set it: that ended every open session."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only
    monkeypatch.setenv("HELIOS_DEMO_PASSWORD", "first-pass-123")
    monkeypatch.setenv("HELIOS_DEMO_REVIEWER_PASSWORD", "first-pass-456")
    call_command("demo_setup", stdout=io.StringIO())
    monkeypatch.setenv("HELIOS_DEMO_PASSWORD", "second-pass-123")
    monkeypatch.setenv("HELIOS_DEMO_REVIEWER_PASSWORD", "second-pass-456")
    out = io.StringIO()
    call_command("demo_setup", stdout=out)
    assert User.objects.get(username="maintainer").check_password("first-pass-123")
    assert User.objects.get(username="reviewer").check_password("first-pass-456")
    assert "password unchanged" in out.getvalue() and "second-pass" not in out.getvalue()


def test_a_real_commit_pushes_the_event_and_flush_can_still_reset_the_tables(transactional_db):
    """Outside a test transaction: on_commit really fires; and the append-only guard (UPDATE only
    in the database) leaves `manage.py flush`, which the test runner uses, working."""
    from heliosweb.recipes.services import recipe_create

    recipe_create(name="tiny-cpu", policy="cost")
    alice = grant(User.objects.create_user("alice"), "propose_decision")
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("recipes", channel)
    propose(alice)
    assert async_to_sync(layer.receive)(channel)["action"] == "proposed"
    call_command("flush", interactive=False, verbosity=0)
    assert decision_events().count() == 0 and PolicyDecision.objects.count() == 0


# --- the rows the chain vouches for (issue 18, row 17) ----------------------------------------


@pytest.mark.parametrize(
    ("sql", "params", "reason"),
    [
        ("UPDATE decisions_policydecision SET rationale = %s", ["nothing to see"], "decision {}: rationale is"),
        ("UPDATE decisions_policydecision SET applied_by_id = %s", None, "decision {}: applied_by is"),
        ("UPDATE decisions_policydecision SET reviewed_by_id = %s", None, "decision {}: reviewed_by is"),
        ("UPDATE decisions_policydecision SET review_reason = %s", ["approved by the board"], "review_reason is"),
        ("UPDATE decisions_policydecision SET to_policy = %s", ["cost"], "decision {}: to_policy is 'cost'"),
        ("UPDATE decisions_policydecision SET status = %s", ["rejected"], "decision {}: status is 'rejected'"),
        ("DELETE FROM decisions_policydecision_evidence", [], "decision {}: evidence is []"),
    ],
)
def test_a_decision_row_edited_by_raw_sql_fails_audit_verify_naming_it(
    author, reviewer, recipe, done_job, sql, params, reason
):
    decision = propose(author, evidence=[done_job.pk])
    services.decision_approve(actor=reviewer, decision=decision)
    services.decision_apply(actor=author, decision=decision)
    assert audit_verify().ok
    if params is None:  # a person column: point it at someone else
        params = [User.objects.create_user("mallory").pk]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    report = audit_verify()
    assert not report.ok and reason.format(decision.pk) in report.reason, report.reason
    with pytest.raises(CommandError, match=f"decision {decision.pk}"):
        call_command("audit_verify")


def test_a_decision_inserted_by_raw_sql_has_no_events_and_is_named(author, recipe):
    propose(author)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO decisions_policydecision (recipe_id, from_policy, to_policy, base_version, rationale, status,"
            " created_by_id, created_at, review_reason) SELECT recipe_id, 'cost', 'rule', 1, 'forged', 'approved',"
            " created_by_id, created_at, '' FROM decisions_policydecision"
        )
    forged = PolicyDecision.objects.get(rationale="forged")
    report = audit_verify()
    assert not report.ok and f"decision {forged.pk} has no proposed event in the audit chain" in report.reason


def _rolled_back(author: User, reviewer: User, recipe) -> None:
    from django.contrib.auth.models import Permission

    from heliosweb.recipes.services import policy_rollback_emergency

    three_events(author, reviewer)  # tiny-cpu: cost -> rule, v2
    olga = User.objects.create_user("olga")
    olga.user_permissions.add(Permission.objects.get(codename="rollback_policy"))
    policy_rollback_emergency(recipe=recipe, actor=User.objects.get(pk=olga.pk), reason="p99 doubled", from_version=2)


FORGED_BANNER = (
    '{"by": "olga", "at": "2026-01-01T00:00:00+00:00", "reason": "routine", "version": 3, "from_policy": "rule"}'
)


@pytest.mark.parametrize(
    ("sql", "params", "reason"),
    [
        (
            "UPDATE recipes_policysetting SET emergency = %s",
            [FORGED_BANNER],
            "'reason': 'routine'",  # named with what it says now (PostgreSQL orders a JSON object's keys)
        ),
        (
            "UPDATE recipes_policysetting SET emergency = NULL",
            [],
            "recipe tiny-cpu's emergency banner is nothing but event #",
        ),
    ],
)
def test_an_emergency_banner_edited_or_removed_by_raw_sql_fails_audit_verify(
    author, reviewer, recipe, sql, params, reason
):
    _rolled_back(author, reviewer, recipe)
    assert audit_verify().ok
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    report = audit_verify()
    assert not report.ok and "recipe tiny-cpu's emergency banner is " in report.reason and reason in report.reason
    with pytest.raises(CommandError, match="tiny-cpu's emergency banner"):
        call_command("audit_verify")


def test_a_banner_from_nowhere_fails_and_one_cleared_by_a_review_verifies(author, reviewer, recipe):
    with connection.cursor() as cursor:
        cursor.execute("UPDATE recipes_policysetting SET emergency = %s", ['{"by": "x"}'])
    report = audit_verify()
    assert "no emergency_rollback event made one" in report.reason
    with connection.cursor() as cursor:
        cursor.execute("UPDATE recipes_policysetting SET emergency = NULL")
    _rolled_back(author, reviewer, recipe)
    follow_up = propose(author, policy="rule", rationale="rule again, p99 explained")
    services.decision_reject(actor=reviewer, decision=follow_up, reason="not yet")  # the review clears the banner
    assert PolicySetting.objects.get().emergency is None
    assert audit_verify().ok
