"""Users' API tokens are stored hashed and shown once (the command and the admin), existing tokens
keep working through the migration that hashed them, and the admin leaves the same audit trail
as the commands for users, groups and tokens (issue 18, row 16)."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from heliosweb.audit.models import AuditEvent
from heliosweb.common.tokens import user_token_key
from heliosweb.decisions.selectors import audit_verify
from heliosweb.telemetry.tokens import user_token_issue

BEFORE = [("telemetry", "0006_engines_bounds_repair")]
AFTER = [("telemetry", "0007_state_user_tokens_hashed")]


def authenticates(token: str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get("/api/jobs/").status_code == 200


def test_the_command_prints_a_token_once_and_only_its_hash_is_stored(viewer):
    out = io.StringIO()
    call_command("create_api_token", "viewer", stdout=out)
    token = out.getvalue().strip()
    assert re.fullmatch(r"[0-9a-f]{40}", token)
    stored = Token.objects.get(user=viewer)
    assert stored.key == user_token_key(token) and stored.key != token
    assert authenticates(token)
    assert not authenticates(stored.key)  # what a copy of the database holds lets nobody in
    with pytest.raises(CommandError, match="viewer has an API token already"):
        call_command("create_api_token", "viewer", stdout=io.StringIO())
    assert Token.objects.get(user=viewer).key == stored.key
    rotated = io.StringIO()
    call_command("create_api_token", "viewer", "--rotate", stdout=rotated)
    assert authenticates(rotated.getvalue().strip()) and not authenticates(token)


def test_the_engine_policy_poll_takes_a_hashed_user_token(viewer, recipe):
    token = user_token_issue(user=viewer)
    client = APIClient()
    assert client.get("/api/recipes/tiny-cpu/policy").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/recipes/tiny-cpu/policy").status_code == 200
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {user_token_key(token)}")
    assert client.get("/api/recipes/tiny-cpu/policy").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_the_migration_hashes_existing_tokens_and_their_clients_keep_working():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        old = executor.loader.project_state([*BEFORE, ("authtoken", "0004_alter_tokenproxy_options")]).apps
        user = old.get_model("auth", "User").objects.create(username="old-client")
        clear = "0123456789abcdef0123456789abcdef01234567"
        row = old.get_model("authtoken", "Token").objects.create(key=clear, user=user)
        created = row.created
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
    finally:
        MigrationExecutor(connection).migrate(executor.loader.graph.leaf_nodes())
    [stored] = Token.objects.all()
    assert (stored.key, stored.user_id, stored.created) == (user_token_key(clear), user.pk, created)
    assert not Token.objects.filter(key=clear).exists()
    assert authenticates(clear)


# --- the admin --------------------------------------------------------------------------------


def events(prefix: str) -> list[tuple[str, str, str]]:
    rows = AuditEvent.objects.filter(action__startswith=prefix).order_by("seq")
    return list(rows.values_list("action", "actor_name", "object_id"))


def test_a_token_created_in_the_admin_is_shown_once_hashed_and_audited(admin_client, viewer):
    response = admin_client.post("/admin/authtoken/tokenproxy/add/", {"user": viewer.pk}, follow=True)
    assert response.status_code == 200
    [shown] = re.findall(r"API token for viewer: ([0-9a-f]{40})", response.content.decode())
    assert Token.objects.get(user=viewer).key == user_token_key(shown) and authenticates(shown)
    assert shown not in admin_client.get("/admin/authtoken/tokenproxy/").content.decode()
    assert shown not in admin_client.get(f"/admin/authtoken/tokenproxy/{viewer.pk}/change/").content.decode()
    admin_client.post(f"/admin/authtoken/tokenproxy/{viewer.pk}/delete/", {"post": "yes"})
    assert not Token.objects.exists() and not authenticates(shown)
    assert events("token_") == [("token_created", "admin", "viewer"), ("token_revoked", "admin", "viewer")]
    assert audit_verify().ok


def test_users_created_changed_and_deleted_in_the_admin_are_audited(admin_client):
    added = admin_client.post(
        "/admin/auth/user/add/",
        {"username": "newbie", "password1": "a-long-pass-phrase-9", "password2": "a-long-pass-phrase-9"},
    )
    assert added.status_code == 302, added.content[:500]
    newbie = User.objects.get(username="newbie")
    operators = Group.objects.get(name="operators")
    changed = admin_client.post(
        f"/admin/auth/user/{newbie.pk}/change/",
        {
            "username": "newbie",
            "email": "n@example.org",
            "is_active": "on",
            "is_staff": "on",
            "groups": [operators.pk],
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
            "initial-date_joined_0": "2026-01-01",
            "initial-date_joined_1": "00:00:00",
        },
    )
    assert changed.status_code == 302, changed.content[:2000]
    admin_client.post(
        f"/admin/auth/user/{newbie.pk}/password/",
        {"password1": "another-pass-phrase-7", "password2": "another-pass-phrase-7"},
    )
    assert admin_client.post(f"/admin/auth/user/{newbie.pk}/delete/", {"post": "yes"}).status_code == 302
    assert [(a, who) for a, who, _ in events("user_")] == [
        ("user_created", "admin"),
        ("user_changed", "admin"),
        ("user_changed", "admin"),
        ("user_deleted", "admin"),
    ]
    created, role, password, deleted = AuditEvent.objects.filter(action__startswith="user_").order_by("seq")
    assert created.before is None and created.after["username"] == "newbie" and created.after["groups"] == []
    assert (role.before["groups"], role.after["groups"]) == ([], ["operators"])
    assert (role.before["is_staff"], role.after["is_staff"]) == (False, True)
    assert "Changed" in role.reason and "password" not in str(role.after).lower()
    assert password.reason == "Changed password." and "pbkdf2" not in str(password.after)
    assert deleted.before["username"] == "newbie" and deleted.after is None
    assert {e.object_id for e in (created, role, password, deleted)} == {str(newbie.pk)}
    assert audit_verify().ok


def test_groups_created_and_changed_in_the_admin_are_audited(admin_client):
    perm = Permission.objects.get(codename="rollback_policy")
    assert admin_client.post("/admin/auth/group/add/", {"name": "oncall"}).status_code == 302
    group = Group.objects.get(name="oncall")
    assert (
        admin_client.post(f"/admin/auth/group/{group.pk}/change/", {"name": "oncall", "permissions": [perm.pk]})
    ).status_code == 302
    unchanged = {"name": "oncall", "permissions": [perm.pk]}
    assert admin_client.post(f"/admin/auth/group/{group.pk}/change/", unchanged).status_code == 302  # no event
    assert admin_client.post(f"/admin/auth/group/{group.pk}/delete/", {"post": "yes"}).status_code == 302
    created, changed, deleted = AuditEvent.objects.filter(action__startswith="group_").order_by("seq")
    assert [e.action for e in (created, changed, deleted)] == ["group_created", "group_changed", "group_deleted"]
    assert (changed.before["permissions"], changed.after["permissions"]) == ([], ["recipes.rollback_policy"])
    assert deleted.before == {"name": "oncall", "permissions": ["recipes.rollback_policy"]}
