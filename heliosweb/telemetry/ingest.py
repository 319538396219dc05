"""Telemetry's writes: ingest a batch (idempotent by recipe, engine, session and number), fold it into
minute rollups and per-version totals in the same transaction, and prune what the window no longer
holds. The read side: `selectors.py`, `consumers.py`, `metrics.py`."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import repeat
from operator import floordiv
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone
from helios_client.records import reported

from heliosweb.catalogs.models import Boot
from heliosweb.common.errors import Conflict, Forbidden
from heliosweb.realtime.broadcast import publish
from heliosweb.recipes.models import Recipe
from heliosweb.recipes.selectors import policy_of_version, setting_of
from scheduler_core.errors import InvalidInput

from . import buckets
from .frames import frame_of
from .models import EngineToken, LiveSequence, Rollup, TelemetryBatch, Totals
from .validation import Batch, Launches, Window, parse_batch

MAX_PROMPT_LENGTHS_PER_MINUTE = 2_000  # bounds a rollup's `sequences`
MAX_SEQUENCES_PER_PROMPT = 16
MAX_COUNTER = 2**63 - 1  # the database's bigint: a counter is checked against it before each write


@dataclass
class _Partial:
    """One (version, minute)'s share of a batch, before it is added to the stored rows."""

    policy: str
    requests: int = 0
    ttft_buckets: list[int] = field(default_factory=buckets.empty)  # named as the stored rows' fields
    ttft_sum_ms: float = 0.0
    itl_buckets: list[int] = field(default_factory=buckets.empty)
    itl_sum_ms: float = 0.0
    request_launches: int = 0
    prefill_launches: int = 0
    launched_tokens: int = 0
    padded_tokens: int = 0
    sequences: dict[str, set[str]] = field(default_factory=dict)
    reported: dict[str, list[float]] = field(default_factory=dict)  # field -> [sum, count] (records.reported)


# A batch is CPU work under the GIL, and SQLite lets one writer in at a time (the others sleep 1, 2, 5 ...
# ms): four batches at once took ~35 % more CPU each, in thread switches and sleeps, than one at a time.
_ONE_BATCH_AT_A_TIME = threading.Lock()


def telemetry_turn() -> threading.Lock:
    """Held around reading and ingesting one batch: the next batch in this process starts when it is done."""
    return _ONE_BATCH_AT_A_TIME


def telemetry_ingest(*, recipe: Recipe, data: Any, engine: str | None = None) -> tuple[TelemetryBatch, Batch, bool]:
    """Store one batch: (row, parsed batch, created); a retry answers the stored row, created False,
    other records under its number are a Conflict. `engine` (an engine token's) is the only engine
    the batch may name. InvalidInput names the first bad field; nothing is stored then."""
    batch = _parsed(recipe, data, engine)
    try:
        with transaction.atomic():
            row = _store(recipe, batch)
    except IntegrityError:  # the unique (recipe, engine, session, batch) refused it; the fold rolled back with it
        stored = _retried(recipe, batch)
        if stored is None:
            raise
        return stored, batch, False
    return row, batch, True


def _parsed(recipe: Recipe, data: Any, engine: str | None) -> Batch:
    """The batch, valid, from whom may post it (without a token, not as an engine that has tokens)."""
    setting = setting_of(recipe)
    if setting is None:
        raise InvalidInput("recipe", f"recipe {recipe.name!r} has no policy setting")
    now_ms = time.time() * 1000
    batch = parse_batch(
        data,
        current_version=setting.version,
        policy_of=lambda version: policy_of_version(recipe=recipe, version=version),
        window=Window(now_ms=now_ms, oldest_ms=now_ms - settings.HELIOS_TELEMETRY_RAW_HOURS * 3_600_000),
    )
    if engine is not None and batch.engine != engine:
        raise InvalidInput("engine", f"this token is engine {engine!r}'s, not {batch.engine!r}'s")
    if engine is None and EngineToken.objects.filter(engine=batch.engine).exists():
        raise Forbidden("engine", f"{batch.engine!r} is a registered engine: only its own token may post as it")
    if batch.boot is not None and not Boot.objects.filter(pk=batch.boot, recipe=recipe).exists():
        raise InvalidInput("boot", f"recipe {recipe.name!r} has no boot {batch.boot}")
    return batch


def _store(recipe: Recipe, batch: Batch) -> TelemetryBatch:
    """Number, fold and store the batch, and publish its frame once committed."""
    seq = _next_seq(recipe)  # first: its row lock makes this the recipe's one writer until commit
    whole = _fold(recipe, batch)
    frame = frame_of(
        seq=seq, batch=batch, itl_counts=whole.itl_buckets, padded=whole.padded_tokens, launched=whole.launched_tokens
    )
    row = TelemetryBatch.objects.create(
        recipe=recipe,
        engine=batch.engine,
        session=batch.session,
        batch=batch.batch,
        boot_id=batch.boot,
        received_at=timezone.now(),
        launch_count=len(batch.launches),
        request_count=len(batch.requests),
        records=batch.records,
        seq=seq,
        frame=frame,
    )
    # `published_ms`: when it left this process (live frames only), for latency measurements.
    topic = live_topic(recipe.name)
    transaction.on_commit(lambda: publish(topic, {"type": "frame", **frame, "published_ms": time.time() * 1000}))
    return row


def _retried(recipe: Recipe, batch: Batch) -> TelemetryBatch | None:
    """The stored batch this one repeats (None: none), or a Conflict when it carries other records."""
    stored = TelemetryBatch.objects.filter(
        recipe=recipe, engine=batch.engine, session=batch.session, batch=batch.batch
    ).first()
    if stored is not None and (stored.records != batch.records or stored.boot_id != batch.boot):
        raise Conflict(
            "batch",
            f"batch {batch.batch} of engine {batch.engine!r}, session {batch.session}, is already stored with "
            "other records: a number is used once per session (a restarted engine picks a new session)",
        )
    return stored


def batch_receipt(row: TelemetryBatch, batch: Batch, created: bool) -> dict[str, Any]:
    """What the API answers for a posted batch (`stored`: false for a retry of a stored one;
    `upgrade`, only for a batch in the previous schema: what to move to, and by when)."""
    receipt = {
        "engine": row.engine,
        "session": row.session,
        "batch": row.batch,
        "stored": created,
        "launches": row.launch_count,  # the answer's keys, documented in docs/api.md
        "requests": row.request_count,
    }
    return receipt if batch.upgrade is None else {**receipt, "upgrade": batch.upgrade}


def _next_seq(recipe: Recipe) -> int:
    """The recipe's next live frame number, in one statement (SQLite >= 3.35 and PostgreSQL)."""
    table = LiveSequence._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (recipe_id, seq) VALUES (%s, 1) "
            f"ON CONFLICT (recipe_id) DO UPDATE SET seq = {table}.seq + 1 RETURNING seq",
            [recipe.pk],
        )
        return int(cursor.fetchone()[0])


def live_topic(recipe_name: str) -> str:
    """The broadcast topic of a recipe's live frames (heliosweb.realtime.broadcast)."""
    return f"live.{recipe_name}"


def _fold(recipe: Recipe, batch: Batch) -> _Partial:
    """Add the batch to its minute rollups and its per-version totals; the batch's own sums."""
    parts: dict[tuple[int, int], _Partial] = {}
    _fold_launches(parts, batch.launches, batch.policy)
    values = reported()
    for r in batch.requests:
        key = (batch.version, int(r["t_ms"] // 60_000))
        part = parts.get(key)
        if part is None:
            part = parts[key] = _Partial(batch.policy)
        part.requests += 1
        part.ttft_buckets[buckets.bucket_of(r["ttft_ms"])] += 1
        part.ttft_sum_ms += r["ttft_ms"]
        for gap in r["itl_ms"]:
            part.itl_buckets[buckets.bucket_of(gap)] += 1
        part.itl_sum_ms += sum(r["itl_ms"])
        part.request_launches += len(r["launches"])
        part.sequences.setdefault(str(r["prompt_tokens"]), set()).add(",".join(map(str, r["launches"])))
        _add_reported(part.reported, {name: [r[name], 1] for name in values if name in r})
    per_version: dict[int, _Partial] = {}
    for (version, minute), part in parts.items():
        when = datetime.fromtimestamp(minute * 60, tz=UTC)
        _add_to_row(Rollup, {"recipe": recipe, "engine": batch.engine, "version": version, "minute": when}, part)
        _add(per_version.setdefault(version, _Partial(part.policy)), part)
    whole = _Partial("")
    seen = {"seen_at": timezone.now()}  # /metrics shows the versions engines posted under lately
    for version, part in per_version.items():
        _add_to_row(Totals, {"recipe": recipe, "engine": batch.engine, "version": version}, part, seen)
        _add(whole, part)
    return whole


def _add_to_row(
    model: type[Rollup] | type[Totals], key: dict[str, Any], part: _Partial, stamp: dict[str, Any] | None = None
) -> None:
    """Add `part` to `model`'s row at `key` (made at zero if missing), `stamp`'s fields set: a launch-only
    part in one UPDATE below MAX_COUNTER (4 ORM round trips were ~4 ms of a 20 ms budget), else read,
    added to (`_add` refuses past MAX_COUNTER) and saved. `_next_seq`'s row lock keeps out races."""
    stamp = stamp or {}
    room = {f"{name}__lte": MAX_COUNTER - getattr(part, name) for name in _LAUNCH_COUNTERS}
    if not part.requests and model.objects.filter(**key, **room).update(
        prefill_launches=F("prefill_launches") + part.prefill_launches,
        launched_tokens=F("launched_tokens") + part.launched_tokens,
        padded_tokens=F("padded_tokens") + part.padded_tokens,
        **stamp,
    ):
        return
    row = model.objects.select_for_update().filter(**key).first() or model(**key, **_zero(part.policy))
    _add(row, part)
    for name, value in stamp.items():
        setattr(row, name, value)
    if isinstance(row, Rollup):
        row.sequences = _union(row.sequences, part.sequences)
    row.save()


_LAUNCH_COUNTERS = ("prefill_launches", "launched_tokens", "padded_tokens")
_COUNTERS = ("requests", "request_launches", *_LAUNCH_COUNTERS)


def _fold_launches(parts: dict[tuple[int, int], _Partial], launches: Launches, policy: str) -> None:
    """Count and sum the launch records per (version, minute): places grouped by key in one pass,
    then summed by C loops. Linear in the minutes a batch spans (selecting each key's records from
    the whole batch was quadratic: 2 s for a batch over 5,000 minutes)."""
    places: dict[tuple[int, int], list[int]] = {}
    for i, key in enumerate(zip(launches.version, map(int, map(floordiv, launches.t_ms, repeat(60_000))))):
        places.setdefault(key, []).append(i)
    for key, mine in places.items():
        part = parts[key] = _Partial(policy)
        part.prefill_launches = len(mine)
        part.launched_tokens = sum(map(launches.graph.__getitem__, mine))
        part.padded_tokens = sum(map(launches.padded.__getitem__, mine))


def _union(stored: dict[str, list[str]], new: dict[str, set[str]]) -> dict[str, list[str]]:
    """Distinct prefill sequences per prompt length, capped (MAX_PROMPT_LENGTHS_PER_MINUTE lengths,
    MAX_SEQUENCES_PER_PROMPT sequences each: more than a few already says "not deterministic")."""
    merged = {length: set(seqs) for length, seqs in stored.items()}
    for length, seqs in new.items():
        have = merged.get(length)
        if have is None:
            if len(merged) >= MAX_PROMPT_LENGTHS_PER_MINUTE:
                continue
            have = merged[length] = set()
        for seq in sorted(seqs):
            if len(have) >= MAX_SEQUENCES_PER_PROMPT:
                break
            have.add(seq)
    return {length: sorted(seqs) for length, seqs in merged.items()}


def _zero(policy: str) -> dict[str, Any]:
    return {"policy": policy, "ttft_buckets": buckets.empty(), "itl_buckets": buckets.empty()}


def _add_reported(into: dict[str, list[float]], part: dict[str, list[float]]) -> None:
    """Add reported sums and counts ({field: [sum, count]}) field by field."""
    for name, (total, count) in part.items():
        mine = into.setdefault(name, [0, 0])
        mine[0] += total
        mine[1] += count


def _add(into: Rollup | Totals | _Partial, part: _Partial) -> None:
    """Add `part` to a stored row (refused, naming the counter, past MAX_COUNTER) or to another part."""
    for name in _COUNTERS:
        total = getattr(into, name) + getattr(part, name)
        if total > MAX_COUNTER and not isinstance(into, _Partial):
            raise InvalidInput(
                "records",
                f"this batch would take {type(into).__name__.lower()} {name} of engine {into.engine!r} "
                f"v{into.version} past {MAX_COUNTER} (the database's integer); nothing was stored",
            )
        setattr(into, name, total)
    buckets.add(into.ttft_buckets, part.ttft_buckets)
    into.ttft_sum_ms += part.ttft_sum_ms
    buckets.add(into.itl_buckets, part.itl_buckets)
    into.itl_sum_ms += part.itl_sum_ms
    _add_reported(into.reported, part.reported)


def telemetry_prune(*, now: datetime | None = None) -> dict[str, int]:
    """Drop raw batches past the window or a recipe's cap, and rollups past theirs; totals stay."""
    now = now or timezone.now()
    cutoff = now - timedelta(hours=settings.HELIOS_TELEMETRY_RAW_HOURS)
    dropped = TelemetryBatch.objects.filter(received_at__lt=cutoff).delete()[0]
    for recipe_id in TelemetryBatch.objects.values_list("recipe", flat=True).distinct():
        dropped += _cap(recipe_id)
    old = Rollup.objects.filter(minute__lt=now - timedelta(days=settings.HELIOS_TELEMETRY_ROLLUP_DAYS))
    return {"batches": dropped, "rollups": old.delete()[0]}


def _cap(recipe_id: int) -> int:
    """Delete a recipe's oldest batches until its records fit HELIOS_TELEMETRY_MAX_RECORDS."""
    cap, kept, cut = settings.HELIOS_TELEMETRY_MAX_RECORDS, 0, None
    for pk, size in (
        TelemetryBatch.objects.filter(recipe_id=recipe_id)
        .order_by("-id")
        .annotate(size=F("launch_count") + F("request_count"))
        .values_list("id", "size")
        .iterator()
    ):
        kept += size
        if kept > cap:
            cut = pk
            break
    if cut is None:
        return 0
    return TelemetryBatch.objects.filter(recipe_id=recipe_id, id__lte=cut).delete()[0]
