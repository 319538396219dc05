"""Telemetry's credentials: engine tokens (scoped to recipes, stored hashed) and users' API tokens,
issued and revoked here, each audited. Checking one on a request is `common.auth` and
`middleware.engine_token_scope`."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from heliosweb.audit.services import audit_append
from heliosweb.common.errors import Conflict
from heliosweb.common.permissions import Actor
from heliosweb.common.tokens import token_digest, user_token_key
from heliosweb.recipes.models import Recipe
from scheduler_core.errors import InvalidInput

from .models import TOKEN_PREFIX, EngineToken
from .validation import ENGINE_NAME

TOKEN_ADMIN = "manage.py"  # tokens are issued from the command line, by whoever runs it there


def engine_token_create(*, engine: str, recipes: Iterable[Recipe]) -> str:
    """A new token for `engine`, limited to `recipes`; returned once, stored only as its hash."""
    if not ENGINE_NAME.match(engine):
        raise InvalidInput("engine", "must be 1-64 letters, digits, '-' or '_'")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    allowed = list(recipes)
    with transaction.atomic():
        row = EngineToken.objects.create(engine=engine, key_hash=token_digest(token))
        row.recipes.set(allowed)
        _audit("token_created", "engine_token", engine, after={"recipes": sorted(r.name for r in allowed)})
    return token


def engine_tokens_revoke(*, engine: str) -> int:
    """Revoke every live token of `engine`; how many were revoked."""
    with transaction.atomic():
        count = EngineToken.objects.filter(engine=engine, revoked_at=None).update(revoked_at=timezone.now())
        _audit("token_revoked", "engine_token", engine, after={"revoked": count})
    return count


def user_token_issue(*, user: User, rotate: bool = False, actor: Actor | None = None) -> str:
    """A new API token for `user`, returned once (`user_token_key` of it stored). A user has one:
    `rotate` replaces it, else Conflict. `actor`: the admin who issued it (None: the command line)."""
    token = secrets.token_hex(20)
    with transaction.atomic():
        had = Token.objects.select_for_update().filter(user=user).exists()
        if had and not rotate:
            raise Conflict(
                "username",
                f"{user.get_username()} has an API token already (a token is shown only when it is made)",
            )
        Token.objects.filter(user=user).delete()
        Token.objects.create(user=user, key=user_token_key(token))
        _audit("token_rotated" if had else "token_created", "user_token", user.get_username(), actor=actor)
    return token


def user_token_revoke(*, user: User, actor: Actor | None = None) -> int:
    with transaction.atomic():
        count, _ = Token.objects.filter(user=user).delete()
        _audit("token_revoked", "user_token", user.get_username(), actor=actor, after={"revoked": count})
    return count


def _audit(action: str, object_type: str, object_id: str, **details: Any) -> None:
    """A token event: by `actor` (an admin user), else by whoever runs `manage.py` (TOKEN_ADMIN)."""
    audit_append(action=action, actor_name=TOKEN_ADMIN, object_type=object_type, object_id=object_id, **details)
