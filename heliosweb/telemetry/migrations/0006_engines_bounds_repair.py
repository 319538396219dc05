"""Repair rollups and totals stored out of today's bounds (issue 18).

Before the bounds, a batch could carry token counts up to 2^63-1 and durations up to 1.7e308: on
SQLite a counter that passed the integer became a float (and every later batch of that engine and
version failed), and sums reached `inf` (the trade-off and `/metrics` failed on them). Such a row
cannot be recomputed (its raw batches are pruned, and were out of bounds themselves), so each
value that does not fit is reset (a counter to 0, a histogram to empty with its sum to 0.0; a float
counter that holds an integer in range becomes that integer) and the row says what was stored in
`repaired` (`{"at", "fields": {name: the stored value as text}}`). Raw batches are left as they
are: they are never summed again and leave with the raw window.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from django.db import migrations

MAX_COUNTER = 2**63 - 1
MAX_MS = 1_000_000.0
COUNTERS = ("requests", "request_launches", "prefill_launches", "launched_tokens", "padded_tokens")
HISTOGRAMS = (("ttft_buckets", "ttft_sum_ms"), ("itl_buckets", "itl_sum_ms"))


def repair_row(row: Any) -> dict[str, str]:
    """Mend `row` in place; {field: stored value as text} for each field it reset."""
    fixed: dict[str, str] = {}
    for name in COUNTERS:
        value = getattr(row, name)
        if type(value) is int and 0 <= value <= MAX_COUNTER:
            continue
        if type(value) is float and value.is_integer() and 0 <= value <= MAX_COUNTER:
            setattr(row, name, int(value))
            continue
        fixed[name] = repr(value)
        setattr(row, name, 0)
    for counts_name, sum_name in HISTOGRAMS:
        counts, total = getattr(row, counts_name), getattr(row, sum_name)
        fits = (
            isinstance(counts, list)
            and all(type(c) is int and 0 <= c <= MAX_COUNTER for c in counts)
            and isinstance(total, (int, float))
            and math.isfinite(total)
            and 0 <= total <= MAX_MS * sum(counts)
        )
        if not fits:
            fixed[counts_name], fixed[sum_name] = repr(counts)[:200], repr(total)
            setattr(row, counts_name, [0] * len(counts) if isinstance(counts, list) else [])
            setattr(row, sum_name, 0.0)
    return fixed


def repair(apps: Any, schema_editor: Any) -> None:
    at = datetime.now(tz=UTC).isoformat()
    fields = [*COUNTERS, *(name for pair in HISTOGRAMS for name in pair), "repaired"]
    for model_name in ("Rollup", "Totals"):
        model = apps.get_model("telemetry", model_name)
        mended = []
        for row in model.objects.only("id", *fields).iterator(chunk_size=2_000):
            fixed = repair_row(row)
            if fixed:
                row.repaired = {"at": at, "fields": fixed}
                mended.append(row)
        model.objects.bulk_update(mended, fields, batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0005_engines_batch_session")]

    operations = [migrations.RunPython(repair, migrations.RunPython.noop)]
