from django.contrib import admin

from .models import PolicySetting, Recipe


class PolicySettingInline(admin.StackedInline):
    model = PolicySetting
    # The active policy changes through services.policy_set (and, later, the decision workflow),
    # never by editing the row: it is shown read-only.
    readonly_fields = ("policy", "version", "updated_at", "updated_by")
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Recipe)
class RecipeAdmin(admin.ModelAdmin):
    list_display = ("name", "created_at")
    search_fields = ("name",)
    inlines = [PolicySettingInline]
