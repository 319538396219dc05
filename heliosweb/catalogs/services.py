"""Writes for catalogs."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from heliosweb.audit.services import audit_append
from heliosweb.common.permissions import Actor
from heliosweb.recipes.models import Recipe
from scheduler_core.catalog import Catalog

from .models import Boot
from .provenance import Provenance


def boot_create(
    *,
    recipe: Recipe,
    catalog: Catalog | Any,
    provenance: Any = None,
    job_id: int | None = None,
    actor: Actor | None = None,
    actor_name: str = "system",
) -> Boot:
    """Store a measured catalog (a capture's or an upload's) as a boot of `recipe`, validated as
    scheduler_core reads it (`Catalog`) and its provenance as pages read it (`Provenance.parse`),
    refused naming the entry. Audited: `boot_uploaded` (by `actor`, or `actor_name`: an engine's
    `engine:NAME`) or `boot_captured`."""
    parsed = catalog if isinstance(catalog, Catalog) else Catalog.from_dicts(catalog)
    stored = Provenance.parse(provenance)
    with transaction.atomic():
        boot = Boot.objects.create(recipe=recipe, catalog=parsed.to_dicts(), provenance=stored, job_id=job_id)
        audit_append(
            action="boot_captured" if job_id else "boot_uploaded",
            actor=actor,
            actor_name=actor_name,
            object_type="boot",
            object_id=boot.pk,
            recipe=recipe.name,
            after={"shapes": len(boot.catalog), "job": job_id, "device": boot.info.device},
        )
    return boot
