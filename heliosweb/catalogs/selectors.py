"""Reads for catalogs."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery
from rest_framework import serializers

from heliosweb.common.api import json_body
from heliosweb.common.bounds import DB_INT_MAX
from heliosweb.common.shapes import Shape, when
from heliosweb.recipes.models import Recipe
from heliosweb.recipes.selectors import recipe_list
from scheduler_core.catalog import MAX_CAPACITY, MAX_GRAPHS, MAX_MS
from scheduler_core.errors import InvalidInput

from .health import boot_healths
from .models import Boot


def recipe_list_with_latest_boot() -> QuerySet[Recipe]:
    """Recipes with their policy and the id/time of their latest boot (`latest_boot_id`, `latest_boot_at`), in one query."""
    latest = Boot.objects.filter(recipe=OuterRef("pk")).order_by("-created_at", "-id")
    return recipe_list().annotate(
        latest_boot_id=Subquery(latest.values("id")[:1]), latest_boot_at=Subquery(latest.values("created_at")[:1])
    )


def boot_list(*, recipe_name: str | None = None, limit: int = 50) -> QuerySet[Boot]:
    qs = Boot.objects.select_related("recipe")
    if recipe_name:
        qs = qs.filter(recipe__name=recipe_name)
    return qs[:limit]


@dataclass(frozen=True)
class BootChoice:
    """A stored boot as a form offers it."""

    id: int
    label: str  # `#id · recipe · device (mode) · when · N shapes[ · drifted …]`


def boot_choices(*, limit: int = 100) -> list[BootChoice]:
    """Recent boots as a form offers them, each with its health."""
    boots = list(boot_list(limit=limit))
    healths: dict[int, Any] = {}
    for recipe_id in {b.recipe_id for b in boots}:
        healths.update(boot_healths(recipe_id=recipe_id))
    out = []
    for boot in boots:
        device = boot.info.device or "uploaded"
        mode = f" ({boot.info.mode})" if boot.info.mode else ""
        drifted = f" · {boot.drifted}" if boot.drifted else ""
        label = (
            f"#{boot.pk} · {boot.recipe.name} · {device}{mode} · "
            f"{boot.created_at:%Y-%m-%d %H:%M} · {len(boot.catalog)} shapes{drifted} · {health_label(healths.get(boot.pk))}"
        )
        out.append(BootChoice(id=boot.pk, label=label))
    return out


def boots_with_health(*, recipe: Recipe, limit: int = 20, also: int | None = None) -> list[Boot]:
    """The recipe's recent boots, each with `.health` (judged against the recipe's boots) and `.badge`;
    then the recipe's boot `also` when it is older than those (a job page links to it)."""
    healths = boot_healths(recipe_id=recipe.pk)
    boots = list(boot_list(recipe_name=recipe.name, limit=limit))
    if also is not None and all(boot.pk != also for boot in boots):
        boots += Boot.objects.select_related("recipe").filter(recipe=recipe, pk=also)
    for boot in boots:
        boot.health = healths.get(boot.pk)  # type: ignore[attr-defined]
        boot.badge = health_label(boot.health)  # type: ignore[attr-defined]
    return boots


def health_label(health: Any) -> str:
    """ "health ok" or "flagged 4096 (outlier), 0+8 (outlier)": how the picker and pages badge a boot."""
    if health is None or health.status == "ok":
        return "health ok"
    shapes = ", ".join(f"{f.prefill}" if f.decode == 0 else f"{f.prefill}+{f.decode}" for f in health.flagged)
    return f"flagged {shapes}"


def boot_catalogs(*, ids: list[Any], field: str) -> list[list[dict[str, Any]]]:
    """The catalogs of stored boots, in the order asked; an unknown id is an error naming `field`."""
    if not ids or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise InvalidInput(field, f"must name stored boots by integer id, got {ids!r}")
    in_range = [i for i in ids if 1 <= i <= DB_INT_MAX]  # an id no key can hold is simply not found
    found = dict(Boot.objects.filter(pk__in=in_range).values_list("pk", "catalog"))
    missing = [i for i in ids if i not in found]
    if missing:
        raise InvalidInput(field, f"no stored boot {missing[0]}")
    return [found[i] for i in ids]


GRAPHS = json_body(  # closed: `Catalog.from_dicts` refuses any other key
    "Graph",
    {
        "prefill": serializers.IntegerField(min_value=0, max_value=MAX_CAPACITY),
        "decode": serializers.IntegerField(min_value=0, max_value=MAX_CAPACITY),
        "ms": serializers.FloatField(
            required=False, allow_null=True, min_value=0, max_value=MAX_MS, help_text="0 or null: unmeasured"
        ),
    },
    many=True,
    max_length=MAX_GRAPHS,
)
BOOT: Shape[Boot] = Shape(
    "Boot",
    {
        "id": (serializers.IntegerField(), attrgetter("pk")),
        "recipe": (serializers.CharField(), attrgetter("recipe.name")),
        "job": (serializers.IntegerField(allow_null=True), attrgetter("job_id")),
        "created_at": (serializers.DateTimeField(), lambda boot: when(boot.created_at)),
        "provenance": (serializers.DictField(), attrgetter("provenance")),
        "catalog": (GRAPHS, attrgetter("catalog")),
    },
)


def boot_as_api(boot: Boot, *, health: Any = None) -> dict[str, Any]:
    """A stored boot; `health` ({status, flagged: [{prefill, decode, reason, ratio}], ...}) when judged."""
    data = BOOT.of(boot)
    if health is not None:
        data["health"] = health.to_dict()
    return data


def boot_capacities(*, recipe_name: str) -> list[int]:
    """The prefill capacities of the recipe's latest boot (empty without one)."""
    boot = Boot.objects.filter(recipe__name=recipe_name).order_by("-created_at", "-id").first()
    return sorted({g["prefill"] for g in boot.catalog if g.get("prefill")}) if boot else []
