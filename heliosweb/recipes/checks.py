"""`manage.py check` flags recipes stored before names were compared ignoring case and `_` against
`-` (`TINY-CPU`, `tiny-cpu`). They are not renamed (engines, audit events and bookmarks name them):
an operator decides which to keep. New ones are refused (`new_recipe_name`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.core.checks import Warning, register
from django.db import DatabaseError


@register("database")
def confusable_recipe_names(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    from .models import Recipe
    from .services import name_key

    try:
        names = list(Recipe.objects.values_list("name", flat=True))
    except DatabaseError:  # not migrated yet: nothing stored to flag
        return []
    same: dict[str, list[str]] = defaultdict(list)
    for name in names:
        same[name_key(name)].append(name)
    return [
        Warning(
            f"recipes {', '.join(sorted(group))} differ only in case or in '_' against '-'",
            hint="rename or retire all but one; new recipes are refused such names",
            id="recipes.W001",
        )
        for group in same.values()
        if len(group) > 1
    ]
