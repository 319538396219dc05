from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from scheduler_core.errors import InvalidInput
from scheduler_core.policies import selectable_policies
from scheduler_core.tradeoff import parse_required

from .models import PolicySetting, Recipe
from .services import EDITABLE, new_recipe_name, parse_shapes, recipe_create, recipe_update


class PolicySettingInline(admin.StackedInline):
    model = PolicySetting
    # The active policy changes through services.policy_set (a decision, or an emergency
    # rollback), never by editing the row: it is shown read-only.
    readonly_fields = ("policy", "version", "previous_policy", "emergency", "updated_at", "updated_by")
    can_delete = False

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False


class RecipeForm(forms.ModelForm):
    """The service's own validation, as form errors. `policy`: the first policy (creating only)."""

    policy = forms.ChoiceField(choices=[(p, p) for p in selectable_policies()], required=False)

    class Meta:
        model = Recipe
        fields = ("name", "description", "hardware", "shapes", "required_evidence")

    def _service_clean(self, field: str, parse: Any) -> Any:
        try:
            return parse(self.cleaned_data.get(field) or [])
        except InvalidInput as exc:
            raise ValidationError(exc.message) from None

    def clean_name(self) -> Any:
        if self.instance.pk is not None:  # read-only once created
            return self.cleaned_data.get("name")
        return self._service_clean("name", new_recipe_name)

    def clean_policy(self) -> Any:
        if self.instance.pk is None and not self.cleaned_data.get("policy"):
            raise ValidationError("required: the recipe's first policy")
        return self.cleaned_data.get("policy")

    def clean_shapes(self) -> Any:
        return self._service_clean("shapes", parse_shapes)

    def clean_required_evidence(self) -> Any:
        return self._service_clean("required_evidence", parse_required)


@admin.register(Recipe)
class RecipeAdmin(admin.ModelAdmin):
    """Saves through the recipe services, like the page and the API: setting created, changes audited."""

    form = RecipeForm
    list_display = ("name", "created_at")
    search_fields = ("name",)
    inlines = [PolicySettingInline]

    def get_readonly_fields(self, request: Any, obj: Any = None) -> tuple[str, ...]:
        return ("name",) if obj is not None else ()

    def save_model(self, request: Any, obj: Recipe, form: Any, change: bool) -> None:
        fields = {k: form.cleaned_data[k] for k in EDITABLE}
        if change:
            recipe_update(recipe=obj, actor=request.user, **fields)
            return
        policy = form.cleaned_data.get("policy") or None
        created = recipe_create(name=form.cleaned_data["name"], policy=policy, actor=request.user, **fields)
        obj.pk, obj.created_at = created.pk, created.created_at
        obj._state.adding = False
