"""Admin: decisions and audit events are history; both are read-only here (changes go through the
services, which write the audit trail)."""

from django.contrib import admin

from heliosweb.common.admin import ReadOnlyAdmin

from .models import AuditEvent, PolicyDecision


@admin.register(PolicyDecision)
class PolicyDecisionAdmin(ReadOnlyAdmin):
    list_display = ("id", "recipe", "from_policy", "to_policy", "base_version", "status", "created_by", "created_at")
    list_filter = ("status", "to_policy")
    list_select_related = ("recipe", "created_by")


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("seq", "action", "actor_name", "recipe_name", "decision", "created_at", "hash")
    list_filter = ("action",)
    search_fields = ("recipe_name", "actor_name", "hash")
