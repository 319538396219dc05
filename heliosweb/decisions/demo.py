"""Demo accounts for the decision workflow, called by the `demo_setup` command.

The demo maintainer may propose and apply; a second account, the reviewer (HELIOS_DEMO_REVIEWER,
default `reviewer`), may also approve, so the four-eyes rule can be tried on one machine.
"""

from __future__ import annotations

import os
import secrets
from typing import TextIO

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group, Permission


def _perms(*codenames: str) -> list[Permission]:
    return list(Permission.objects.filter(content_type__app_label="decisions", codename__in=codenames))


def demo_decisions_setup(*, maintainer: AbstractBaseUser, stdout: TextIO) -> None:
    """Idempotent: groups `maintainers` (+ propose, apply) and `approvers` (+ approve), the reviewer."""
    maintainers, _ = Group.objects.get_or_create(name="maintainers")
    maintainers.permissions.add(*_perms("propose_decision", "apply_decision"))
    approvers, _ = Group.objects.get_or_create(name="approvers")
    approvers.permissions.add(*_perms("approve_decision"))
    maintainer.groups.add(maintainers)

    username = os.environ.get("HELIOS_DEMO_REVIEWER", "reviewer")
    password = os.environ.get("HELIOS_DEMO_REVIEWER_PASSWORD", "")
    user_model = get_user_model()
    reviewer = user_model.objects.filter(username=username).first()
    if reviewer is None:
        password = password or secrets.token_urlsafe(12)
        reviewer = user_model.objects.create_user(username=username, password=password, is_staff=True)
        stdout.write(f"demo reviewer (can approve decisions): {username} / password: {password}\n")
    elif password:
        reviewer.set_password(password)
        reviewer.save(update_fields=["password"])
        stdout.write(f"demo reviewer: {username} / password: (from HELIOS_DEMO_REVIEWER_PASSWORD)\n")
    else:
        stdout.write(f"demo reviewer: {username} (password unchanged; set HELIOS_DEMO_REVIEWER_PASSWORD to reset it)\n")
    reviewer.groups.add(maintainers, approvers)
    view = Permission.objects.filter(
        content_type__app_label__in=["decisions", "jobs", "recipes", "catalogs"], codename__startswith="view_"
    )
    maintainer.user_permissions.add(*view.filter(content_type__app_label="decisions"))
    reviewer.user_permissions.add(*view)
