"""Privileges, audited however they are granted (the admin, a shell, a fixture): a user's superuser
flag, groups and own permissions, and each group's permissions. Every change Django signals
(`m2m_changed` on the three relations, a user's `post_save`) appends `privileges_changed` with the
whole set before and after; `privilege_mismatches` (`audit_verify`) names a grant written around
Django (raw SQL). The role groups' own permissions (`dashboard.roles`, seeded after every `migrate`
and `flush`) are the product's definition, not a grant: seeding runs `quietly()`, and a group with
no event is held to its role's permissions (`expect_groups`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from django.contrib.auth.models import Group, User
from django.db.models.signals import m2m_changed, post_save
from django.dispatch import receiver

from .models import AuditEvent
from .services import audit_append

ACTION = "privileges_changed"
NONE: dict[str, Any] = {"superuser": False, "groups": [], "permissions": []}  # a user nothing was granted
_declared: dict[str, list[str]] = {}  # a role group's permissions, as its role declares them
_quiet = False


def expect_groups(roles: Mapping[str, Sequence[str]]) -> None:
    """Hold each named group, until its first event, to the permissions given (`app.codename`)."""
    _declared.update({name: sorted(perms) for name, perms in roles.items()})


@contextmanager
def quietly() -> Iterator[None]:
    """The product seeding its role groups: no event (their baseline is `expect_groups`)."""
    global _quiet
    _quiet = True
    try:
        yield
    finally:
        _quiet = False


def _group_baseline(group: Group) -> dict[str, Any]:
    return {"permissions": _declared.get(group.name, [])}


def _codenames(permissions: Any) -> list[str]:
    return sorted(f"{app}.{code}" for app, code in permissions.values_list("content_type__app_label", "codename"))


def user_privileges(user: User) -> dict[str, Any]:
    return {
        "superuser": user.is_superuser,
        "groups": sorted(user.groups.values_list("name", flat=True)),
        "permissions": _codenames(user.user_permissions.all()),
    }


def group_privileges(group: Group) -> dict[str, Any]:
    return {"permissions": _codenames(group.permissions.all())}


def _last(object_type: str, object_id: int) -> dict[str, Any] | None:
    events = AuditEvent.objects.filter(action=ACTION, object_type=object_type, object_id=str(object_id))
    return events.order_by("-seq").values_list("after", flat=True).first()


def _record(object_type: str, obj: User | Group) -> None:
    now = user_privileges(obj) if isinstance(obj, User) else group_privileges(obj)
    before = _last(object_type, obj.pk) or (NONE if isinstance(obj, User) else _group_baseline(obj))
    if now != before and not _quiet:
        audit_append(
            action=ACTION,
            actor_name="system",
            object_type=object_type,
            object_id=obj.pk,
            before=before,
            after=now,
            reason=f"{object_type} {obj}",
        )


@receiver(m2m_changed, sender=User.groups.through)
@receiver(m2m_changed, sender=User.user_permissions.through)
@receiver(m2m_changed, sender=Group.permissions.through)
def _relation_changed(sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any) -> None:
    if sender is User.groups.through and reverse and action == "pre_clear":
        instance._audit_members = list(instance.user_set.values_list("pk", flat=True))  # clear() names none
        return
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if sender is Group.permissions.through:
        groups = [instance] if not reverse else list(Group.objects.filter(pk__in=pk_set or ()))
        for group in groups:
            _record("group", group)
        return
    if not reverse:
        _record("user", instance)
        return
    members = pk_set if action != "post_clear" else getattr(instance, "_audit_members", ())
    for user in User.objects.filter(pk__in=members or ()):
        _record("user", user)


@receiver(post_save, sender=User)
def _user_saved(sender: Any, instance: User, created: bool, update_fields: Any = None, **kwargs: Any) -> None:
    if update_fields is not None and "is_superuser" not in update_fields:
        return  # a login's last_login, a password: no privilege changed
    if created and not instance.is_superuser:
        return  # a new user has nothing yet: its grants come through the relations
    _record("user", instance)


def record_all() -> None:
    """An event for every user and group whose privileges differ from their last event (none yet,
    on a database from before this module): the baseline later checks compare with."""
    for user in User.objects.order_by("pk").iterator(chunk_size=500):
        _record("user", user)
    for group in Group.objects.order_by("pk"):
        _record("group", group)


def privilege_mismatches() -> list[str]:
    """Users and groups whose privileges differ from their last `privileges_changed` event (or any without one)."""
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for object_type, object_id, after in (
        AuditEvent.objects.filter(action=ACTION).order_by("seq").values_list("object_type", "object_id", "after")
    ):
        last[(object_type, object_id)] = after or {}
    # Every grant in three queries (not two a user and one a group: the pages run this on every view).
    groups_of = _grouped(User.groups.through.objects.values_list("user_id", "group__name"))
    perm = ("permission__content_type__app_label", "permission__codename")
    user_perms = _grouped(User.user_permissions.through.objects.values_list("user_id", *perm))
    group_perms = _grouped(Group.permissions.through.objects.values_list("group_id", *perm))
    problems = []
    for pk, name, superuser in User.objects.order_by("pk").values_list("pk", "username", "is_superuser"):
        said = last.get(("user", str(pk)), NONE)
        now = {"superuser": superuser, "groups": groups_of.get(pk, []), "permissions": user_perms.get(pk, [])}
        if now != said:
            problems.append(f"user {name}'s privileges differ from its last audit event: {_diff(now, said)}")
    for group in Group.objects.order_by("pk"):
        said = last.get(("group", str(group.pk))) or _group_baseline(group)
        now = {"permissions": group_perms.get(group.pk, [])}
        if now != said:
            problems.append(f"group {group.name}'s privileges differ from its last audit event: {_diff(now, said)}")
    return problems


def _grouped(rows: Any) -> dict[int, list[str]]:
    """(owner, name parts...) rows as each owner's sorted names, the parts joined by dots (`app.codename`)."""
    names: dict[int, list[str]] = {}
    for owner, *parts in rows:
        names.setdefault(owner, []).append(".".join(parts))
    return {owner: sorted(found) for owner, found in names.items()}


def _diff(now: dict[str, Any], said: dict[str, Any]) -> str:
    """What is stored beyond (+) or short of (-) what the event says, per key."""
    parts = []
    for key, value in now.items():
        was = said.get(key)
        if value == was:
            continue
        if isinstance(value, list):
            more = [f"+{v}" for v in sorted(set(value) - set(was or []))]
            fewer = [f"-{v}" for v in sorted(set(was or []) - set(value))]
            parts.append(f"{key} {' '.join(more + fewer)}")
        else:
            parts.append(f"{key} {value} (the event: {was})")
    return "; ".join(parts)[:300]
