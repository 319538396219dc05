"""Stored traces: real traffic uploaded once (by content hash), parsed and summarised once."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Lower


class Trace(models.Model):
    name = models.CharField(max_length=100)
    sha256 = models.CharField(max_length=64, unique=True, help_text="of the uploaded bytes")
    format = models.CharField(max_length=16, help_text="azure-csv or jsonl")
    size_bytes = models.PositiveBigIntegerField()
    requests = models.PositiveIntegerField()
    # The parsed requests, packed by `codec`: zlib of the arrival/prompt/output/id arrays.
    packed = models.BinaryField()
    shapes = models.JSONField(
        default=dict, blank=True, help_text="spans and boundaries of the few requests that have them"
    )
    summary = models.JSONField(help_text="scheduler_core.traffic.summarise_trace")
    created_by = models.ForeignKey("auth.User", null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(Lower("name"), name="trace_name_unique_ci")]

    def __str__(self) -> str:
        return f"trace {self.name} ({self.requests} requests)"
