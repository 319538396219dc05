"""The permission matrix: every role x every mutating endpoint and form, allowed or refused by the
server (whatever the pages show), and the pages showing each role only what it may do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.test import Client

from heliosweb.dashboard.roles import ROLES
from heliosweb.decisions import services
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.recipes.services import policy_set

from .conftest import grant
from .test_decisions import RATIONALE

ROLE_NAMES = tuple(ROLES)
CATALOG = [{"prefill": 64, "decode": 0, "ms": 1.0}]


class World:
    """One recipe with history, a pending and an approved decision by someone else, a queued job."""

    def __init__(self, recipe: Any) -> None:
        author = grant(User.objects.create_user("author"), "propose_decision")
        reviewer = grant(User.objects.create_user("second"), "approve_decision")
        policy_set(recipe=recipe, policy="rule")  # so there is a previous policy to roll back to
        self.pending = services.decision_propose(actor=author, recipe="tiny-cpu", policy="cost", rationale=RATIONALE)
        self.approved = services.decision_approve(
            actor=reviewer,
            decision=services.decision_propose(actor=author, recipe="tiny-cpu", policy="cost", rationale=RATIONALE),
        )
        self.job = BenchmarkJob.objects.create(kind="pr22", queue="sim", recipe=recipe)


Call = Callable[[Client, World], Any]
JSON = "application/json"

# (name, roles allowed, the request). Allowed means the server did it (2xx or a redirect after it).
ENDPOINTS: list[tuple[str, set[str], Call]] = [
    (
        "POST /api/jobs/",
        {"maintainers", "operators"},
        lambda c, w: c.post("/api/jobs/", {"kind": "pr22"}, content_type=JSON),
    ),
    ("POST /api/jobs/<id>/cancel/", {"maintainers", "operators"}, lambda c, w: c.post(f"/api/jobs/{w.job.pk}/cancel/")),
    (
        "POST /api/recipes/<name>/boots/",
        {"maintainers", "operators"},
        lambda c, w: c.post("/api/recipes/tiny-cpu/boots/", {"catalog": CATALOG}, content_type=JSON),
    ),
    (
        "POST /api/recipes/",
        {"operators"},
        lambda c, w: c.post("/api/recipes/", {"name": "new-one", "policy": "cost"}, content_type=JSON),
    ),
    (
        "PATCH /api/recipes/<name>/",
        {"operators"},
        lambda c, w: c.patch("/api/recipes/tiny-cpu/", {"description": "edited"}, content_type=JSON),
    ),
    (
        "POST /api/recipes/<name>/rollback/",
        {"operators"},
        lambda c, w: c.post(
            "/api/recipes/tiny-cpu/rollback/", {"reason": "incident", "from_version": 2}, content_type=JSON
        ),
    ),
    (
        "POST /api/decisions/",
        {"maintainers"},
        lambda c, w: c.post(
            "/api/decisions/", {"recipe": "tiny-cpu", "policy": "cost", "rationale": "r"}, content_type=JSON
        ),
    ),
    (
        "POST /api/decisions/<id>/approve/",
        {"approvers"},
        lambda c, w: c.post(f"/api/decisions/{w.pending.pk}/approve/", {}, content_type=JSON),
    ),
    (
        "POST /api/decisions/<id>/reject/",
        {"approvers"},
        lambda c, w: c.post(f"/api/decisions/{w.pending.pk}/reject/", {"reason": "no"}, content_type=JSON),
    ),
    (
        "POST /api/decisions/<id>/apply/",
        {"operators"},
        lambda c, w: c.post(f"/api/decisions/{w.approved.pk}/apply/", {}, content_type=JSON),
    ),
    (
        "POST /api/decisions/<id>/comments/",
        {"maintainers", "approvers"},
        lambda c, w: c.post(f"/api/decisions/{w.pending.pk}/comments/", {"body": "hm"}, content_type=JSON),
    ),
    ("form /jobs/new", {"maintainers", "operators"}, lambda c, w: c.post("/jobs/new", {"kind": "pr22"})),
    ("form /jobs/<id>/cancel", {"maintainers", "operators"}, lambda c, w: c.post(f"/jobs/{w.job.pk}/cancel")),
    (
        "form /decisions/new",
        {"maintainers"},
        lambda c, w: c.post("/decisions/new", {"recipe": "tiny-cpu", "policy": "cost", "rationale": "r"}),
    ),
    ("form /decisions/<id>/approve", {"approvers"}, lambda c, w: c.post(f"/decisions/{w.pending.pk}/approve")),
    (
        "form /decisions/<id>/reject",
        {"approvers"},
        lambda c, w: c.post(f"/decisions/{w.pending.pk}/reject", {"reason": "no"}),
    ),
    ("form /decisions/<id>/apply", {"operators"}, lambda c, w: c.post(f"/decisions/{w.approved.pk}/apply")),
    (
        "form /decisions/<id>/comment",
        {"maintainers", "approvers"},
        lambda c, w: c.post(f"/decisions/{w.pending.pk}/comment", {"body": "hm"}),
    ),
    (
        "form /recipes/<name>/engine",
        {"maintainers", "operators"},
        lambda c, w: c.post("/recipes/tiny-cpu/engine", {"action": "start", "catalog": "clean"}),
    ),
    (
        "form /recipes/new",
        {"operators"},
        lambda c, w: c.post("/recipes/new", {"name": "new-one", "policy": "cost", "shapes": "[]"}),
    ),
    (
        "form /recipes/<name>/edit",
        {"operators"},
        lambda c, w: c.post("/recipes/tiny-cpu/edit", {"description": "edited", "shapes": "[]"}),
    ),
    (
        "form /recipes/<name>/rollback",
        {"operators"},
        lambda c, w: c.post("/recipes/tiny-cpu/rollback", {"reason": "incident", "from_version": "2"}),
    ),
]


def member(role: str) -> User:
    user = User.objects.create_user(f"a-{role}")
    user.groups.add(Group.objects.get(name=role))
    return user


def test_the_migration_created_the_four_roles(db):
    assert set(Group.objects.values_list("name", flat=True)) >= set(ROLE_NAMES)
    perms = {p.codename for p in Group.objects.get(name="approvers").permissions.all()}
    assert perms == {"approve_decision", "comment_decision"}


@pytest.mark.parametrize("name, allowed, call", ENDPOINTS, ids=[e[0] for e in ENDPOINTS])
def test_permission_matrix(recipe, name, allowed, call):
    world = World(recipe)
    users = {role: member(role) for role in ROLE_NAMES}
    outcome = {}
    for role, user in users.items():
        client = Client()
        client.force_login(user)
        with transaction.atomic():  # each role tries against the same state
            response = call(client, world)
            outcome[role] = response.status_code
            transaction.set_rollback(True)
    for role, status in outcome.items():
        if role in allowed:
            assert status < 400, f"{name}: {role} should be allowed, got {status}"
        else:
            assert status == 403, f"{name}: {role} should be refused with 403, got {status}"


def test_pages_show_each_role_only_what_it_may_do(recipe):
    world = World(recipe)

    def page(role: str, url: str) -> str:
        client = Client()
        client.force_login(
            member(role)
            if not User.objects.filter(username=f"a-{role}").exists()
            else User.objects.get(username=f"a-{role}")
        )
        return client.get(url).content.decode()

    for role in ROLE_NAMES:
        recipe_page = page(role, "/recipes/tiny-cpu")
        assert ('id="emergency-rollback"' in recipe_page) == (role == "operators")
        assert ('id="recipe-edit"' in recipe_page) == (role == "operators")
        pending = page(role, f"/decisions/{world.pending.pk}")
        assert ('data-step="approve"' in pending) == (role == "approvers")
        assert ('id="comment-form"' in pending) == (role in ("maintainers", "approvers"))
        approved = page(role, f"/decisions/{world.approved.pk}")
        assert ('data-step="apply"' in approved) == (role == "operators")
        decisions = page(role, "/decisions/")
        assert ("Propose a policy change" in decisions) == (role == "maintainers")
        dashboard = page(role, "/")
        may_run = role in ("maintainers", "operators")
        assert ("Start a job" in dashboard) == may_run
        assert (">New job</a>" in dashboard) == may_run  # the header of every page
        assert ('id="trace-upload"' in page(role, "/traces")) == may_run


@pytest.mark.django_db(transaction=True)
def test_the_roles_survive_a_flush():
    """The test runner flushes between transactional tests; the groups must come back."""
    from django.core.management import call_command

    call_command("flush", verbosity=0, interactive=False)
    assert set(Group.objects.values_list("name", flat=True)) >= set(ROLE_NAMES)
    assert Group.objects.get(name="operators").permissions.filter(codename="apply_decision").exists()
