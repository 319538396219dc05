"""Writes for catalogs."""

from __future__ import annotations

from typing import Any

from heliosweb.recipes.models import Recipe
from scheduler_core.catalog import Catalog
from scheduler_core.errors import InvalidInput

from .models import Boot


def boot_create(*, recipe: Recipe, catalog: Any, provenance: Any = None, job_id: int | None = None) -> Boot:
    """Store a measured catalog as a boot of `recipe`. Whether it comes from a capture job or an
    upload, it is validated as scheduler_core reads it; an invalid one is refused naming the entry."""
    parsed = Catalog.from_dicts(catalog)
    if provenance is not None and not isinstance(provenance, dict):
        raise InvalidInput("provenance", f"must be an object, got {type(provenance).__name__}")
    return Boot.objects.create(recipe=recipe, catalog=parsed.to_dicts(), provenance=provenance or {}, job_id=job_id)
