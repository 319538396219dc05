"""Demo data for `./dev up` (`manage.py demo_setup`), in the top app because it touches every app.

Idempotent: a demo maintainer (HELIOS_DEMO_USER, default `maintainer`; groups maintainers and
operators, so one person can propose and apply), a second account (HELIOS_DEMO_REVIEWER, default
`reviewer`; maintainers and approvers) so the four-eyes rule can be tried on one machine, and the
demo recipes. The groups themselves come from `roles.py`.
"""

from __future__ import annotations

import os
import secrets
from io import TextIOBase

from django.contrib.auth.models import Group, Permission, User

from heliosweb.recipes.services import recipe_ensure

from .roles import roles_ensure

DEMO_RECIPES = [
    ("llama-8b-h100", "8B decoder, one H100, CUDA graphs captured per shape", "cost"),
    ("mistral-7b-a100", "7B decoder, one A100", "rule"),
    ("tiny-cpu", "the seeded tiny model gpu_runner builds (CPU or any GPU)", "cost"),
]
HISTORY_APPS = ["decisions", "jobs", "recipes", "catalogs"]  # staff read them in the (read-only) admin


def demo_setup(*, username: str, stdout: TextIOBase) -> None:
    roles_ensure(Group, Permission)
    maintainers, approvers, operators = (Group.objects.get(name=n) for n in ("maintainers", "approvers", "operators"))
    view = Permission.objects.filter(content_type__app_label__in=HISTORY_APPS, codename__startswith="view_")

    maintainer = _demo_user(username, "HELIOS_DEMO_PASSWORD", "demo maintainer", stdout)
    maintainer.groups.add(maintainers, operators)
    maintainer.user_permissions.add(*view)
    reviewer_name = os.environ.get("HELIOS_DEMO_REVIEWER", "reviewer")
    reviewer = _demo_user(
        reviewer_name, "HELIOS_DEMO_REVIEWER_PASSWORD", "demo reviewer (can approve decisions)", stdout
    )
    reviewer.groups.add(maintainers, approvers)
    reviewer.user_permissions.add(*view)
    for name, description, policy in DEMO_RECIPES:
        recipe_ensure(name=name, description=description, policy=policy)


def _demo_user(username: str, password_env: str, role: str, stdout: TextIOBase) -> User:
    """The staff account `username`, created with the password from `password_env` (or a printed
    random one). An existing account keeps its password: re-setting it on every start ended every
    open session (their websockets reconnected with 403)."""
    user = User.objects.filter(username=username).first()
    if user is not None:
        stdout.write(f"{role}: {username} (password unchanged; `manage.py changepassword {username}` resets it)\n")
        return user
    password = os.environ.get(password_env, "") or secrets.token_urlsafe(12)
    user = User.objects.create_user(username=username, password=password, is_staff=True)
    stdout.write(f"{role}: {username} / password: {password}\n")
    return user
