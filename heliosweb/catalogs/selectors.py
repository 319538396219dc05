"""Reads for catalogs."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import Boot


def boot_list(*, recipe_name: str | None = None, limit: int = 50) -> QuerySet[Boot]:
    qs = Boot.objects.select_related("recipe")
    if recipe_name:
        qs = qs.filter(recipe__name=recipe_name)
    return qs[:limit]
