"""Reads of stored traces: by name (case-insensitive), as the API shows them, and as traffic."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers

from heliosweb.common.errors import NotFound
from heliosweb.common.shapes import Shape
from scheduler_core.traffic import TraceTraffic

from . import codec
from .models import Trace

LIST_FIELDS = ("id", "name", "sha256", "format", "size_bytes", "requests", "summary", "created_at")


def trace_list() -> QuerySet[Trace]:
    return Trace.objects.only(*LIST_FIELDS)


def trace_names() -> list[str]:
    return list(Trace.objects.order_by("name").values_list("name", flat=True))


def trace_get(*, name: Any, field: str = "name") -> Trace:
    """The trace stored under `name` (any case), or NotFound naming `field`."""
    found = Trace.objects.filter(name__iexact=name).first() if isinstance(name, str) else None
    if found is None:
        raise NotFound(field, f"no stored trace named {name!r}")
    return found


def trace_traffic(trace: Trace) -> TraceTraffic:
    """The stored requests, as scheduler_core parsed them at upload."""
    return codec.unpack(trace.packed, trace.shapes, name=trace.name, fmt=trace.format)


TRACE: Shape[Trace] = Shape(
    "Trace",
    {
        "name": (serializers.CharField(), attrgetter("name")),
        "sha256": (serializers.CharField(), attrgetter("sha256")),
        "format": (serializers.ChoiceField(["azure-csv", "jsonl"]), attrgetter("format")),
        "bytes": (serializers.IntegerField(), attrgetter("size_bytes")),
        "requests": (serializers.IntegerField(), attrgetter("requests")),
        "created_at": (serializers.DateTimeField(), attrgetter("created_at")),
        "summary": (serializers.DictField(help_text="scheduler_core.traffic.summarise_trace"), attrgetter("summary")),
    },
)
trace_as_api = TRACE.of
