"""`/metrics` in the Prometheus text format, computed from the database on each scrape, so every
web process answers the same (no per-process counters to merge, no multiprocess directory).

Per recipe, engine and policy version: `helios_ttft_seconds` and `helios_itl_seconds` histograms
and the `helios_prefill_launches_total` / `helios_padded_tokens_total` / `helios_launched_tokens_total`
counters (padding share = padded / launched), all from
`Totals` (never pruned, so counters never go down); `helios_policy_version` per recipe; jobs by
state; Celery queue depth (with Redis). Access: a bearer token (`HELIOS_METRICS_TOKEN`) or, without
one, only clients from `HELIOS_METRICS_ALLOW` (loopback by default), by `common.clients.client_ip`: behind a
local proxy, set `HELIOS_TRUSTED_PROXIES` or every client looks like loopback.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator

import redis
from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from heliosweb.celery import QUEUES
from heliosweb.common.auth import bearer_token
from heliosweb.common.clients import client_ip
from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.recipes.models import PolicySetting

from . import buckets
from .models import Totals

log = logging.getLogger(__name__)
LABELS = ["recipe", "engine", "version", "policy"]
FORWARDED_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


class DatabaseCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        ttft = HistogramMetricFamily("helios_ttft_seconds", "Time to first token reported by engines", labels=LABELS)
        itl = HistogramMetricFamily("helios_itl_seconds", "Inter-token latency reported by engines", labels=LABELS)
        prefill_launches = CounterMetricFamily(
            "helios_prefill_launches", "Prefill launches reported by engines", labels=LABELS
        )
        padded = CounterMetricFamily("helios_padded_tokens", "Padded prefill tokens reported by engines", labels=LABELS)
        launched = CounterMetricFamily(
            "helios_launched_tokens", "Graph capacity of the prefill launches reported by engines", labels=LABELS
        )
        for t in Totals.objects.select_related("recipe").order_by("recipe__name", "engine", "version"):
            labels = [t.recipe.name, t.engine, str(t.version), t.policy]
            ttft.add_metric(labels, buckets.cumulative_seconds(t.ttft_buckets), t.ttft_sum_ms / 1000.0)
            itl.add_metric(labels, buckets.cumulative_seconds(t.itl_buckets), t.itl_sum_ms / 1000.0)
            prefill_launches.add_metric(labels, t.prefill_launches)
            padded.add_metric(labels, t.padded_tokens)
            launched.add_metric(labels, t.launched_tokens)
        yield from (ttft, itl, prefill_launches, padded, launched)
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
            return {q: int(client.llen(prefix + q)) for q in QUEUES}
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
        return JsonResponse(
            {
                "error": "metrics need HELIOS_METRICS_TOKEN as a bearer token, or a client address in HELIOS_METRICS_ALLOW",
                "field": "authorization",
            },
            status=403,
        )
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


def _allowed(request: HttpRequest) -> bool:
    token = settings.HELIOS_METRICS_TOKEN
    if token:
        given = bearer_token(request.headers.get("Authorization", ""))
        return given is not None and hmac.compare_digest(given.encode(), token.encode())
    if not settings.HELIOS_TRUSTED_PROXIES and any(h in request.META for h in FORWARDED_HEADERS):
        return False  # a proxy forwarded it (whoever sent it), and no proxy is trusted to say who
    return client_ip(request) in settings.HELIOS_METRICS_ALLOW
