from django.contrib import admin

from heliosweb.common.admin import ReadOnlyAdmin

from .models import Boot


@admin.register(Boot)
class BootAdmin(ReadOnlyAdmin):
    list_display = ("id", "recipe", "job", "created_at")
    list_select_related = ("recipe", "job")
