"""Admin: jobs and their events are history, so they are read-only here."""

from django.contrib import admin

from heliosweb.common.admin import ReadOnlyAdmin

from .models import BenchmarkJob, JobEvent


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
