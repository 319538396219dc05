"""The four roles, as groups: what each may do. Created by migration (dashboard 0001) and again
after every `migrate` and `flush` (post_migrate), so a fresh database, a test database reset and
an existing one all have them. The pages hide what a role may not do; the services refuse it anyway.

| group       | may |
|-------------|-----|
| viewers     | read everything (no permission needed beyond being logged in) |
| maintainers | start and cancel jobs, upload boots, propose decisions, comment |
| approvers   | approve and reject decisions (never their own), comment |
| operators   | apply approved decisions, create and edit recipes, emergency rollback, start and stop engines |
"""

from __future__ import annotations

from typing import Any

from heliosweb.audit.grants import expect_groups, quietly
from heliosweb.common.permissions import RUN_JOBS

ROLES: dict[str, tuple[str, ...]] = {
    "viewers": (),
    "maintainers": (RUN_JOBS, "decisions.propose_decision", "decisions.comment_decision"),
    "approvers": ("decisions.approve_decision", "decisions.comment_decision"),
    # Engines are jobs of kind `engine`: starting one takes run_jobs.
    "operators": (
        "decisions.apply_decision",
        "recipes.manage_recipes",
        "recipes.rollback_policy",
        "recipes.add_recipe",
        "recipes.change_recipe",
        RUN_JOBS,
    ),
}


def roles_ensure(group_model: Any, permission_model: Any) -> None:
    """Create the groups and grant exactly their permissions (idempotent; extra grants stay), as
    the product's definition: no privilege event (`audit.grants.quietly`)."""
    with quietly():
        _ensure(group_model, permission_model)


def _ensure(group_model: Any, permission_model: Any) -> None:
    for name, perms in ROLES.items():
        group, _ = group_model.objects.get_or_create(name=name)
        for perm in perms:
            app_label, codename = perm.split(".")
            found = permission_model.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if found is not None:  # its app's permissions are created by post_migrate, later on a fresh db
                group.permissions.add(found)


expect_groups(ROLES)  # what audit_verify holds each role group to until its first privilege event
