"""Catalog health of stored boots (the checks live in `scheduler_core.health`): each boot judged
against its recipe's other boots, and the `repaired` version of a boot that jobs can plan with."""

from __future__ import annotations

from typing import Any

from scheduler_core.catalog import Catalog
from scheduler_core.errors import InvalidInput
from scheduler_core.health import BootHealth, boots_health, repaired, shape_noise
from scheduler_core.tradeoff import StoredBoot

from .models import Boot

RECIPE_BOOTS = 200  # a recipe's most recent boots, judged together


def recipe_boots(*, recipe_id: int) -> list[StoredBoot]:
    """The recipe's recent boots as the core reads them (newest first)."""
    rows = Boot.objects.filter(recipe_id=recipe_id).values_list("pk", "catalog")[:RECIPE_BOOTS]
    return [StoredBoot(pk, Catalog.from_dicts(catalog)) for pk, catalog in rows]


def boot_healths(*, recipe_id: int) -> dict[int, BootHealth]:
    boots = recipe_boots(recipe_id=recipe_id)
    return dict(zip((b.id for b in boots), boots_health([b.catalog for b in boots]), strict=True))


def recipe_noise(*, recipe_id: int) -> list[dict[str, Any]]:
    return [n.to_dict() for n in shape_noise([b.catalog for b in recipe_boots(recipe_id=recipe_id)])]


def boot_repaired(*, boot_id: int, field: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(catalog, repair record) of the boot with its flagged shapes replaced; each replacement lists
    `from_boots`, the boots whose median replaced it (empty when this boot's own fit did)."""
    boot = Boot.objects.filter(pk=boot_id).only("pk", "recipe_id").first()
    if boot is None:
        raise InvalidInput(field, f"no stored boot {boot_id}")
    boots = recipe_boots(recipe_id=boot.recipe_id)
    mine = next((b for b in boots if b.id == boot.pk), None)
    if mine is None:  # older than the recipe's recent boots: judged on its own
        mine = StoredBoot(boot.pk, Catalog.from_dicts(Boot.objects.get(pk=boot.pk).catalog))
        boots = [mine]
    repair = repaired(mine.catalog, [b.catalog for b in boots])
    replaced = [
        {
            **{k: v for k, v in r.items() if k != "from_index"},
            "from_boots": sorted(boots[i].id for i in r["from_index"]),
        }
        for r in repair.replaced
    ]
    return repair.catalog.to_dicts(), {"boot": boot.pk, **repair.record(), "replaced": replaced}
