"""Writes for catalogs."""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from heliosweb.audit.services import audit_append
from heliosweb.common.permissions import Actor
from heliosweb.recipes.models import Recipe
from scheduler_core.catalog import Catalog
from scheduler_core.errors import InvalidInput

from .models import Boot

MAX_PROVENANCE_BYTES = 64 * 1024  # where a boot came from, not a place for its data


def boot_create(
    *,
    recipe: Recipe,
    catalog: Catalog | Any,
    provenance: Any = None,
    job_id: int | None = None,
    actor: Actor | None = None,
) -> Boot:
    """Store a measured catalog as a boot of `recipe`. Whether it comes from a capture job or an
    upload, it is validated as scheduler_core reads it (JSON dicts parsed once into a `Catalog`; a
    `Catalog` taken as it is); an invalid one is refused naming the entry. It becomes dicts again
    only to be stored.
    Audited: `boot_uploaded` (by `actor`) or `boot_captured` (by the capture job)."""
    parsed = catalog if isinstance(catalog, Catalog) else Catalog.from_dicts(catalog)
    if provenance is not None and not isinstance(provenance, dict):
        raise InvalidInput("provenance", f"must be an object, got {type(provenance).__name__}")
    size = len(json.dumps(provenance or {}).encode())
    if size > MAX_PROVENANCE_BYTES:
        raise InvalidInput("provenance", f"is {size:,} bytes as JSON, at most {MAX_PROVENANCE_BYTES:,} allowed")
    with transaction.atomic():
        boot = Boot.objects.create(recipe=recipe, catalog=parsed.to_dicts(), provenance=provenance or {}, job_id=job_id)
        audit_append(
            action="boot_captured" if job_id else "boot_uploaded",
            actor=actor,
            actor_name="system",
            object_type="boot",
            object_id=boot.pk,
            recipe=recipe.name,
            after={"shapes": len(boot.catalog), "job": job_id, "device": boot.provenance.get("device")},
        )
    return boot
