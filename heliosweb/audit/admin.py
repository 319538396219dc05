"""Admin: the audit trail is read-only here, as everywhere; and `AuditedAdmin`, the base of every
admin that edits something no service writes (users, groups), so the admin leaves the same trail
as the rest of the product."""

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin.models import LogEntry

from heliosweb.common.admin import ReadOnlyAdmin

from .models import AuditEvent
from .services import audit_append


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


class AuditedAdmin(admin.ModelAdmin):
    """Appends `<audit_type>_created`, `_changed` or `_deleted` for each change made here, by the
    admin user, with `audit_snapshot` before and after, in the transaction where Django logs it."""

    audit_type = ""

    def audit_snapshot(self, obj: Any) -> dict[str, Any]:
        raise NotImplementedError

    def save_model(self, request: Any, obj: Any, form: Any, change: bool) -> None:
        if change:
            obj._audit_before = self.audit_snapshot(type(obj).objects.get(pk=obj.pk))
        super().save_model(request, obj, form, change)

    def log_addition(self, request: Any, obj: Any, message: Any) -> Any:
        self._audit(request, obj, "created", None, self.audit_snapshot(obj), message)
        return super().log_addition(request, obj, message)

    def log_change(self, request: Any, obj: Any, message: Any) -> Any:
        before, after = getattr(obj, "_audit_before", None), self.audit_snapshot(obj)
        if before != after:  # a save that changed nothing is no event (as the services skip a no-op)
            self._audit(request, obj, "changed", before, after, message)
        return super().log_change(request, obj, message)

    def log_deletions(self, request: Any, queryset: Any) -> Any:
        for obj in queryset:
            self._audit(request, obj, "deleted", self.audit_snapshot(obj), None, "")
        return super().log_deletions(request, queryset)

    def _audit(self, request: Any, obj: Any, what: str, before: Any, after: Any, message: Any) -> None:
        audit_append(
            action=f"{self.audit_type}_{what}",
            actor=request.user,
            object_type=self.audit_type,
            object_id=obj.pk,
            before=before,
            after=after,
            reason=_message_text(message),
        )


def _message_text(message: Any) -> str:
    """The admin's change message as the admin's history shows it ("Changed Groups.")."""
    if isinstance(message, list):
        return LogEntry(change_message=json.dumps(message)).get_change_message()
    return str(message or "")
