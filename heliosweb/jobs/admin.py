"""Admin: jobs, their events and catalogs are history, so they are read-only here."""

from django.contrib import admin

from .models import BenchmarkJob, JobEvent


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(BenchmarkJob)
class BenchmarkJobAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "recipe", "status", "progress_done", "progress_total", "created_by", "created_at")
    list_filter = ("status", "kind", "queue")
    list_select_related = ("recipe", "created_by")


@admin.register(JobEvent)
class JobEventAdmin(ReadOnlyAdmin):
    list_display = ("job", "seq", "type", "created_at")
    list_filter = ("type",)
    list_select_related = ("job",)
