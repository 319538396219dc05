"""A real Prometheus (Debian's `prometheus`) scraping a running stack: `histogram_quantile` reads
TTFT and ITL quantiles of a known sample within 10 %, and every expression of the Grafana board
(`docs/grafana-helios.json`) parses and returns data from a live simulated engine, before and
after a policy change."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from heliosweb.devtool import free_port
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.recipes.services import policy_set
from heliosweb.simengine.services import engine_start, engine_stop
from heliosweb.telemetry.ingest import telemetry_ingest
from tests.heliosweb.telemetry_records import body, finished

from .conftest import ROOT, stop, wait_until

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.path.exists(PROMETHEUS) and not os.environ.get("CI"),
        reason="needs Debian's prometheus (apt-get install -y prometheus); never skipped in CI",
    ),
]
BOARD = json.loads((ROOT / "docs" / "grafana-helios.json").read_text())
# What Grafana puts in for its variables: the recipe picked, and a rate window of four scrapes.
GRAFANA_VARIABLES = {"$recipe": "tiny-cpu", "$__rate_interval": "4s"}


class Prometheus:
    def __init__(self, target: str, tmp: Path) -> None:
        self.port = free_port()
        config = tmp / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            f"  - {{job_name: helios, metrics_path: /metrics, static_configs: [{{targets: ['{target}']}}]}}\n"
        )
        self.log = tmp / "prometheus.log"
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        wait_until(self.ready, timeout=60, what="Prometheus to be ready")

    def ready(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query; a parse or evaluation error fails here, naming the expression."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                answer = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{expr}: {exc.read().decode()}") from exc
        assert answer["status"] == "success", (expr, answer)
        return answer["data"]["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None


@pytest.fixture
def prometheus(stack, tmp_path: Path) -> Iterator[Prometheus]:
    stack.start_web()
    prom = Prometheus(f"127.0.0.1:{stack.port}", tmp_path)
    try:
        wait_until(lambda: prom.value('up{job="helios"}') == 1.0, timeout=60, what="the first scrape of /metrics")
        yield prom
    finally:
        stop(prom.proc, 10)


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(q * len(ordered)) - 1]


def test_histogram_quantile_reads_ttft_and_itl_within_ten_percent_of_the_exact_quantiles(prometheus, recipe):
    rng = random.Random(22)
    ttfts = [rng.lognormvariate(math.log(180.0), 0.6) for _ in range(2000)]
    gaps = [[rng.lognormvariate(math.log(25.0), 0.4) for _ in range(4)] for _ in ttfts]
    for batch in range(2):
        part = range(batch * 1000, (batch + 1) * 1000)
        records = [finished(i, ttft_ms=ttfts[i], itl_ms=gaps[i]) for i in part]
        telemetry_ingest(recipe=recipe, data=body(records, batch=batch + 1, engine="known-sample"))
    selector = '{recipe="tiny-cpu"}'  # histograms sum the recipe's engines (one here)
    wait_until(
        lambda: prometheus.value(f"sum(helios_ttft_seconds_count{selector})") == 2000.0,
        timeout=30,
        what="Prometheus to scrape the sample",
    )
    every_gap = [g for request in gaps for g in request]
    for family, sample in (("helios_ttft_seconds", ttfts), ("helios_itl_seconds", every_gap)):
        for q in (0.5, 0.95, 0.99):
            read = prometheus.value(f"histogram_quantile({q}, sum by (le) ({family}_bucket{selector}))")
            exact = nearest_rank(sample, q) / 1000.0
            assert read is not None and abs(read - exact) <= 0.10 * exact, (family, q, read, exact)


def test_every_grafana_expression_returns_data_from_a_live_engine_across_a_policy_change(
    prometheus, stack, recipe, maintainer
):
    stack.start_engine_worker()
    job = engine_start(recipe=recipe, user=maintainer, params={"rate_per_s": 40.0, "batch_ms": 200})
    try:
        launches = 'sum(helios_prefill_launches_total{recipe="tiny-cpu"})'
        wait_until(lambda: (prometheus.value(launches) or 0) > 0, timeout=90, what="the engine's launches scraped")
        time.sleep(5)  # a few scrapes more, so every rate() window holds two samples that differ
        check_every_expression(prometheus)

        policy_set(recipe=recipe, policy="rule")
        wait_until(
            lambda: prometheus.query('helios_prefill_launches_total{recipe="tiny-cpu", policy="rule"}'),
            timeout=60,
            what="launches under the new version scraped",
        )
        time.sleep(5)
        check_every_expression(prometheus)
        active = prometheus.query(expression(BOARD_TARGETS["Active policy version"][0]["expr"]))
        assert [(s["metric"]["policy"], s["value"][1]) for s in active] == [("rule", "2")]
    finally:
        engine_stop(recipe=recipe)
        wait_until(
            lambda: BenchmarkJob.objects.get(pk=job.pk).status == "cancelled", timeout=30, what="the engine to stop"
        )


BOARD_TARGETS = {panel["title"]: panel["targets"] for panel in BOARD["panels"]}


def expression(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def check_every_expression(prometheus: Prometheus) -> None:
    for title, targets in BOARD_TARGETS.items():
        for target in targets:
            result = prometheus.query(expression(target["expr"]))
            # A policy no longer running has no rate in the window: NaN there, a gap on the panel.
            values = [float(s["value"][1]) for s in result]
            assert any(not math.isnan(v) for v in values), (title, target["expr"], result)
    variable = next(v for v in BOARD["templating"]["list"] if v["name"] == "recipe")
    metric = variable["query"].removeprefix("label_values(").split(",")[0]
    assert {s["metric"]["recipe"] for s in prometheus.query(metric)} == {"tiny-cpu"}
