"""What engines report, kept bounded (sizes: `docs/telemetry.md`). `TelemetryBatch` is one POST as
received (the raw window, the live page's refill); `Rollup` sums per minute, engine and version;
`Totals` per engine and version, never pruned (`/metrics`' counters). `EngineToken` lets one engine
read the policies and post the telemetry of the recipes it names, nothing else.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "heng_"  # tells an engine token from a user's at a glance (and to the scope middleware)


class EngineToken(models.Model):
    """A bearer token for one engine; only its SHA-256 is stored (as strong as 32 random bytes)."""

    engine = models.SlugField(max_length=64)
    key_hash = models.CharField(max_length=64, unique=True)
    recipes = models.ManyToManyField("recipes.Recipe", related_name="engine_tokens")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"engine token {self.pk} of {self.engine}" + (" (revoked)" if self.revoked_at else "")


class RecordsEncoder(json.JSONEncoder):
    """A batch's records are validated plain JSON (string keys, 64-bit integers): orjson writes 1,000
    in ~0.3 ms, json's encoder ~3 and ujson ~1.5 (compact text; the values read back the same)."""

    def encode(self, o: Any) -> str:
        return orjson.dumps(o).decode()


class TelemetryBatch(models.Model):
    recipe = models.ForeignKey("recipes.Recipe", on_delete=models.CASCADE, related_name="telemetry_batches")
    engine = models.SlugField(max_length=64)
    session = models.CharField(
        max_length=36, default="", help_text="the UUID the engine picked at its start ('' before schema 2)"
    )
    batch = models.PositiveBigIntegerField(
        help_text="the engine's own number in its session: a retried POST repeats it"
    )
    boot = models.ForeignKey("catalogs.Boot", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    received_at = models.DateTimeField(db_index=True)
    launch_count = models.PositiveIntegerField()
    request_count = models.PositiveIntegerField()
    records = models.JSONField(encoder=RecordsEncoder, help_text="the validated records as posted")
    seq = models.PositiveBigIntegerField(help_text="the recipe's live frame number: 1, 2, 3, ... with no gaps")
    frame = models.JSONField(help_text="what the live page draws of this batch (telemetry.frames)")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["recipe", "engine", "session", "batch"], name="one_batch_per_engine_session_number"
            ),
            models.UniqueConstraint(fields=["recipe", "seq"], name="one_frame_per_recipe_number"),
        ]

    def __str__(self) -> str:
        return f"batch {self.batch} of {self.engine} ({self.launch_count} launches, {self.request_count} requests)"


class LiveSequence(models.Model):
    """A recipe's last live frame number: a batch takes the next with one upsert that holds this row
    to commit (one writer per recipe), where locking the recipe and reading Max(seq) took two queries."""

    recipe = models.OneToOneField("recipes.Recipe", on_delete=models.CASCADE, primary_key=True, related_name="+")
    seq = models.PositiveBigIntegerField()

    def __str__(self) -> str:
        return f"live frame {self.seq} of recipe {self.recipe_id}"


class Aggregate(models.Model):
    """Sums that merge by addition: latency histograms on `buckets.EDGES_MS`, launch and token counts."""

    recipe = models.ForeignKey("recipes.Recipe", on_delete=models.CASCADE, related_name="+")
    engine = models.SlugField(max_length=64)
    version = models.PositiveIntegerField()
    policy = models.CharField(max_length=32)
    requests = models.PositiveBigIntegerField(default=0)
    ttft_buckets = models.JSONField(help_text="request counts per TTFT bucket")
    ttft_sum_ms = models.FloatField(default=0.0)
    itl_buckets = models.JSONField(help_text="token gap counts per ITL bucket")
    itl_sum_ms = models.FloatField(default=0.0)
    request_launches = models.PositiveBigIntegerField(default=0, help_text="prefill launches of finished requests")
    prefill_launches = models.PositiveBigIntegerField(default=0, help_text="launch records")
    launched_tokens = models.PositiveBigIntegerField(default=0, help_text="graph capacity of the launches")
    padded_tokens = models.PositiveBigIntegerField(default=0)
    reported = models.JSONField(
        default=dict,
        blank=True,
        help_text="{field: [sum, count]} of each reported field (helios_client.records.reported)",
    )
    repaired = models.JSONField(
        null=True,
        blank=True,
        help_text="what the bounds repair (migration 0006) reset, as stored before it: {field: value}, and when",
    )

    class Meta:
        abstract = True


class Rollup(Aggregate):
    """One minute of one engine under one policy version; kept after the raw batches are pruned."""

    minute = models.DateTimeField()
    sequences = models.JSONField(
        default=dict, help_text="{prompt_tokens: [distinct prefill graph sequences]} (the determinism claim)"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["recipe", "engine", "version", "minute"], name="one_rollup_per_minute")
        ]
        indexes = [models.Index(fields=["recipe", "minute"])]

    def __str__(self) -> str:
        return f"{self.engine} v{self.version} at {self.minute:%Y-%m-%d %H:%M}: {self.requests} requests"


class Totals(Aggregate):
    """Everything one engine reported under one policy version: Prometheus counters, never decreasing."""

    seen_at = models.DateTimeField(
        default=timezone.now,
        db_index=True,
        help_text="when the engine last posted under this version (/metrics' window)",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["recipe", "engine", "version"], name="one_total_per_version")]

    def __str__(self) -> str:
        return f"{self.engine} v{self.version}: {self.requests} requests"
