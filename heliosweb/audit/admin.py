"""Admin: the audit trail is read-only here, as everywhere."""

from django.contrib import admin

from heliosweb.common.admin import ReadOnlyAdmin

from .models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = (
        "seq",
        "action",
        "actor_name",
        "client_addr",
        "recipe_name",
        "object_type",
        "object_id",
        "created_at",
    )
    list_filter = ("action", "object_type")
    search_fields = ("recipe_name", "actor_name", "object_id", "hash")
