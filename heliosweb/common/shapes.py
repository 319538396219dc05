"""A response shape declared once: each key's serializer field (what the API schema documents) beside
its getter (what the answer holds), so the two cannot drift apart. `shape.of(obj)` is the answer in
plain JSON types; `shape.schema()` the serializer drf-spectacular reads."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Generic, TypeVar

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

T = TypeVar("T")
Key = tuple[serializers.Field, Callable[[T], Any]]


def when(t: Any) -> str | None:
    """A timestamp as the API writes it (ISO 8601 with its offset), or None."""
    return t.isoformat() if t is not None else None


def username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


class Shape(Generic[T]):
    def __init__(self, name: str, keys: Mapping[str, Key[T]]) -> None:
        self.name = name
        self.keys = dict(keys)
        self._serializers: dict[str, type[serializers.Serializer]] = {}  # one class per component name

    def of(self, obj: T, *, left_out: Collection[str] = ()) -> dict[str, Any]:
        """The answer for `obj`; keys in `left_out` are null, their getters not called (lists)."""
        return {key: None if key in left_out else get(obj) for key, (_, get) in self.keys.items()}

    def fields(self, *, without: Collection[str] = ()) -> dict[str, serializers.Field]:
        return {key: field for key, (field, _) in self.keys.items() if key not in without}

    def schema(
        self,
        name: str | None = None,
        *,
        many: bool = False,
        extra: Mapping[str, serializers.Field] | None = None,
        without: Collection[str] = (),
    ) -> Any:
        """The serializer drf-spectacular documents; a list (`many`) and an item share one component."""
        name = name or self.name
        if name not in self._serializers:
            declared = inline_serializer(name, {**self.fields(without=without), **(extra or {})})
            self._serializers[name] = type(declared)
        return self._serializers[name](many=many)
