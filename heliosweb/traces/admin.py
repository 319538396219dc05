from django.contrib import admin

from heliosweb.common.admin import ReadOnlyAdmin

from .models import Trace


@admin.register(Trace)
class TraceAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "format", "requests", "size_bytes", "created_at")
    exclude = ("packed",)
