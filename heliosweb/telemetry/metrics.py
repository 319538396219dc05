"""`/metrics` in the Prometheus text format, from the database, so every web process answers the same.

From `Totals` (never pruned: counters never go down): TTFT and ITL histograms per recipe, version
and policy (engines summed: what the Grafana board reads), launch and token counters and a summary
per reported field per engine too, the active policy versions, jobs by state, Celery queue depth.
Bounded (docs/telemetry.md, "Cardinality"): only series engines posted within
`HELIOS_METRICS_WINDOW_SECONDS`, at most `HELIOS_METRICS_MAX_ENGINE_SERIES` (engine, version) series
and the latest `HELIOS_METRICS_MAX_VERSIONS` versions' histograms per recipe (per-engine histograms
made a scrape 934 KB and 2.76 s); the rest is dropped, never summed elsewhere (its counter would go
down), and counted in `helios_metrics_series_left_out`. Access: `HELIOS_METRICS_TOKEN` as a bearer
token, or else clients in `HELIOS_METRICS_ALLOW` (behind a local proxy, set `HELIOS_TRUSTED_PROXIES`).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

import redis
from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from helios_client.records import reported
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from heliosweb.celery import QUEUES
from heliosweb.common.auth import bearer_token
from heliosweb.common.clients import client_ip
from heliosweb.common.http_errors import json_error
from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.recipes.models import PolicySetting

from . import buckets
from .metrics_snapshot import served_exposition
from .models import Totals

log = logging.getLogger(__name__)
LABELS = ["recipe", "engine", "version", "policy"]
HISTOGRAM_LABELS = ["recipe", "version", "policy"]
FORWARDED_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


class DatabaseCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        left_out = GaugeMetricFamily(
            "helios_metrics_series_left_out",
            "Series seen in the window but not exported: engine_version over HELIOS_METRICS_MAX_ENGINE_SERIES, "
            "histogram_version over HELIOS_METRICS_MAX_VERSIONS a recipe",
            labels=["kind"],
        )
        yield from _engine_counters(left_out)
        yield from _histograms(left_out)
        yield left_out
        yield from _others()


def _recent() -> Any:
    return Totals.objects.filter(
        seen_at__gte=timezone.now() - timedelta(seconds=settings.HELIOS_METRICS_WINDOW_SECONDS)
    )


def _engine_counters(left_out: GaugeMetricFamily) -> Iterator[Metric]:
    """The launch counters of the (engine, version) series seen in the window, the latest first."""
    prefill_launches = CounterMetricFamily(
        "helios_prefill_launches", "Prefill launches reported by engines", labels=LABELS
    )
    padded = CounterMetricFamily("helios_padded_tokens", "Padded prefill tokens reported by engines", labels=LABELS)
    launched = CounterMetricFamily(
        "helios_launched_tokens", "Graph capacity of the prefill launches reported by engines", labels=LABELS
    )
    values = {
        name: SummaryMetricFamily(f"helios_reported_{name}", f"{r.title} ({r.unit}) reported by engines", labels=LABELS)
        for name, r in reported().items()
    }
    bound = settings.HELIOS_METRICS_MAX_ENGINE_SERIES
    fields = ("recipe__name", "engine", "version", "policy", "prefill_launches", "padded_tokens", "launched_tokens")
    rows = list(_recent().order_by("-seen_at", "pk").values_list(*fields, "reported")[: bound + 1])
    for name, engine, version, policy, n_launches, n_padded, n_launched, sums in sorted(rows[:bound]):
        labels = [name, engine, str(version), policy]
        prefill_launches.add_metric(labels, n_launches)
        padded.add_metric(labels, n_padded)
        launched.add_metric(labels, n_launched)
        for field, (total, count) in sums.items():
            if field in values:
                values[field].add_metric(labels, count_value=count, sum_value=total)
    yield from (prefill_launches, padded, launched, *values.values())
    left_out.add_metric(["engine_version"], _recent().count() - bound if len(rows) > bound else 0)


def _histograms(left_out: GaugeMetricFamily) -> Iterator[Metric]:
    """TTFT and ITL per recipe, version and policy, engines summed (all of a version's rows, so the
    sum never goes down), for the latest versions of each recipe seen in the window."""
    ttft = HistogramMetricFamily(
        "helios_ttft_seconds", "Time to first token reported by engines", labels=HISTOGRAM_LABELS
    )
    itl = HistogramMetricFamily(
        "helios_itl_seconds", "Inter-token latency reported by engines", labels=HISTOGRAM_LABELS
    )
    seen: dict[int, list[int]] = {}
    for recipe_id, version in _recent().values_list("recipe", "version").distinct():
        seen.setdefault(recipe_id, []).append(version)
    latest = {r: sorted(v)[-settings.HELIOS_METRICS_MAX_VERSIONS :] for r, v in seen.items()}
    recent = {(r, v) for r, versions in latest.items() for v in versions}
    parts: dict[tuple[str, int, str], list[tuple[list[int], float, list[int], float]]] = {}
    keys = Totals.objects.filter(recipe__in=latest, version__in={v for _, v in recent})
    fields = (
        "recipe_id",
        "recipe__name",
        "version",
        "policy",
        "ttft_buckets",
        "ttft_sum_ms",
        "itl_buckets",
        "itl_sum_ms",
    )
    for recipe_id, name, version, policy, ttft_b, ttft_ms, itl_b, itl_ms in keys.values_list(*fields).iterator():
        if (recipe_id, version) not in recent:
            continue  # a version of another recipe that shares the number
        parts.setdefault((name, version, policy), []).append((ttft_b, ttft_ms, itl_b, itl_ms))
    for (name, version, policy), rows in sorted(parts.items()):
        labels = [name, str(version), policy]
        ttft.add_metric(labels, buckets.cumulative_seconds(_summed(r[0] for r in rows)), sum(r[1] for r in rows) / 1000)
        itl.add_metric(labels, buckets.cumulative_seconds(_summed(r[2] for r in rows)), sum(r[3] for r in rows) / 1000)
    yield from (ttft, itl)
    left_out.add_metric(["histogram_version"], sum(len(v) for v in seen.values()) - len(recent))


def _summed(histograms: Iterable[list[int]]) -> list[int]:
    """Bucket by bucket (each column summed in C: 100 engines' histograms in ~1 ms, not ~10)."""
    return [sum(column) for column in zip(*histograms, strict=True)] or buckets.empty()


def _others() -> Iterator[Metric]:
    version = GaugeMetricFamily(
        "helios_policy_version", "Active policy version per recipe", labels=["recipe", "policy"]
    )
    for s in PolicySetting.objects.select_related("recipe").order_by("recipe__name"):
        version.add_metric([s.recipe.name, s.policy], s.version)
    yield version
    jobs = GaugeMetricFamily("helios_jobs", "Benchmark jobs by state", labels=["state"])
    counts = dict(BenchmarkJob.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    for state in JobStatus.values:
        jobs.add_metric([state], counts.get(state, 0))
    yield jobs
    # Declared even without Redis (no samples then), so the families served never depend on it.
    queue = GaugeMetricFamily("helios_queue_depth", "Tasks waiting in each Celery queue", labels=["queue"])
    for name, n in (_queue_depths() or {}).items():
        queue.add_metric([name], n)
    yield queue


def _queue_depths() -> dict[str, int] | None:
    """Messages waiting per queue (kombu's Redis transport keeps each queue as a list), or None."""
    if not settings.REDIS_URL:
        return None
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        with client:
            prefix = str(settings.CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"])  # HELIOS_BROKER_KEY_PREFIX
            with client.pipeline(transaction=False) as pipe:  # one round trip for every queue
                for q in QUEUES:
                    pipe.llen(prefix + q)
                return dict(zip(QUEUES, map(int, pipe.execute()), strict=True))
    except redis.RedisError as exc:
        log.warning("queue depth unavailable: %s", exc)
        return None


def exposition() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector())
    return generate_latest(registry)


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        why = "metrics need HELIOS_METRICS_TOKEN as a bearer token, or a client address in HELIOS_METRICS_ALLOW"
        return json_error(403, "authorization", why)
    return HttpResponse(served_exposition(exposition), content_type=CONTENT_TYPE_LATEST)


def _allowed(request: HttpRequest) -> bool:
    token = settings.HELIOS_METRICS_TOKEN
    if token:
        given = bearer_token(request.headers.get("Authorization", ""))
        return given is not None and hmac.compare_digest(given.encode(), token.encode())
    if not settings.HELIOS_TRUSTED_PROXIES and any(h in request.META for h in FORWARDED_HEADERS):
        return False  # a proxy forwarded it (whoever sent it), and no proxy is trusted to say who
    return client_ip(request) in settings.HELIOS_METRICS_ALLOW
