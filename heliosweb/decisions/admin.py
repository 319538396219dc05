"""Admin: decisions are history; read-only here (changes go through the services, which write
the audit trail)."""

from django.contrib import admin

from heliosweb.common.admin import ReadOnlyAdmin

from .models import DecisionComment, PolicyDecision


@admin.register(PolicyDecision)
class PolicyDecisionAdmin(ReadOnlyAdmin):
    list_display = ("id", "recipe", "from_policy", "to_policy", "base_version", "status", "created_by", "created_at")
    list_filter = ("status", "to_policy")
    list_select_related = ("recipe", "created_by")


@admin.register(DecisionComment)
class DecisionCommentAdmin(ReadOnlyAdmin):
    list_display = ("id", "decision", "author", "created_at")
