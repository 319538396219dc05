"""Writes for catalogs."""

from __future__ import annotations

from typing import Any

from heliosweb.recipes.models import Recipe

from .models import Boot


def boot_create(*, recipe: Recipe, catalog: list[dict[str, Any]], provenance: dict[str, Any] | None = None,
                job_id: int | None = None) -> Boot:
    return Boot.objects.create(recipe=recipe, catalog=catalog, provenance=provenance or {}, job_id=job_id)
