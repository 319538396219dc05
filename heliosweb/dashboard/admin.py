"""Users and groups (the four roles, `roles.py`) in the admin, audited like every other change:
who created, changed or deleted which account or role, and what it holds before and after
(never a password: "Changed password." is all the trail says of one)."""

from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User

from heliosweb.audit.admin import AuditedAdmin


def _permissions(holder: Any) -> list[str]:
    return sorted(f"{p.content_type.app_label}.{p.codename}" for p in holder.select_related("content_type"))


class AuditedUserAdmin(AuditedAdmin, UserAdmin):
    audit_type = "user"

    def audit_snapshot(self, obj: Any) -> dict[str, Any]:
        return {
            "username": obj.username,
            "email": obj.email,
            "is_active": obj.is_active,
            "is_staff": obj.is_staff,
            "is_superuser": obj.is_superuser,
            "groups": sorted(obj.groups.values_list("name", flat=True)),
            "user_permissions": _permissions(obj.user_permissions),
        }


class AuditedGroupAdmin(AuditedAdmin, GroupAdmin):
    audit_type = "group"

    def audit_snapshot(self, obj: Any) -> dict[str, Any]:
        return {"name": obj.name, "permissions": _permissions(obj.permissions)}


admin.site.unregister(User)
admin.site.register(User, AuditedUserAdmin)
admin.site.unregister(Group)
admin.site.register(Group, AuditedGroupAdmin)
