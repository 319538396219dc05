"""Issue 19's decision on real traffic, in Chromium, as a maintainer does it: upload the Azure trace
on /traces, run `capacity` on it from the job form (a real worker), read the overlaid curves the job
page draws, propose a decision citing the job, and read the decision page's capacity, delta,
padding and worst-request rows (one of them opened on /explain), at 1280 and 390 px."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from heliosweb.decisions.models import PolicyDecision
from heliosweb.jobs.models import BenchmarkJob

from .conftest import log_in_and_open, needs_chromium, wait_until
from .test_traces import AZURE
from .test_tradeoff import rate_text

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"

# The curves as drawn: every trace of a figure, read back from Plotly's own graph div.
CURVES = """id => Array.from(document.querySelector(`#figures [data-figure-id="${id}"]`).data,
                 t => ({name: t.name, x: Array.from(t.x), y: Array.from(t.y)}))"""


def _upload_and_run_capacity(page, base: str) -> BenchmarkJob:
    page.goto(f"{base}/traces")
    page.fill("#trace-upload input[name=name]", "azure-code")
    page.set_input_files("#trace-upload input[name=file]", str(AZURE))
    page.click("#trace-upload button[type=submit]")
    page.wait_for_selector("#trace-azure-code .trace-figures [data-figure-id] .main-svg")
    page.goto(f"{base}/jobs/new?kind=capacity")
    page.select_option("select[name='capacity.trace.stored']", "azure-code")
    page.fill("[name='capacity.limit']", "3000")  # the first 3,000 requests: a few seconds on a loaded CPU
    page.fill("[name='capacity.rate_min_per_s']", "0.5")
    page.fill("[name='capacity.rate_max_per_s']", "12")
    page.fill("[name='capacity.steps']", "6")
    page.click("#start-job")
    page.wait_for_url(lambda url: "/jobs/" in url and "/new" not in url)
    job = BenchmarkJob.objects.get(kind="capacity")
    return wait_until(
        lambda: BenchmarkJob.objects.filter(pk=job.pk, status__in=("done", "failed")).first(),
        timeout=180,
        what="the capacity job to finish",
    )


def test_capacity_on_an_uploaded_trace_becomes_a_decisions_evidence_in_chromium(stack, page, recipe):
    User.objects.create_user("mia", password="pw-mia-123").groups.add(Group.objects.get(name="maintainers"))
    stack.start_web()
    base = stack.base_url
    SHOTS.mkdir(parents=True, exist_ok=True)
    log_in_and_open(page, f"{base}/traces", "mia", "pw-mia-123")
    job = _upload_and_run_capacity(page, base)
    assert job.status == "done", (job.error, stack.worker_log()[-3000:])
    assert job.result["traffic"] == {**job.result["traffic"], "source": "trace", "requests": 3000}
    policies = {p["policy"]: p for p in job.result["policies"]}

    # The job page's overlaid curves: one goodput curve per policy over its stepped and searched rates, as stored.
    page.goto(f"{base}/jobs/{job.pk}")
    page.wait_for_selector('#figures [data-figure-id="goodput"] .main-svg')
    goodput = {c["name"].split()[0]: c for c in page.evaluate(CURVES, "goodput")}
    assert set(goodput) == {"offered", "cost", "rule"}
    for name, p in policies.items():
        drawn = sorted([*p["points"], *p["search"]], key=lambda pt: pt["rate_per_s"])
        assert set(job.result["rates_per_s"]) <= set(goodput[name]["x"])
        assert goodput[name]["x"] == [pt["rate_per_s"] for pt in drawn]
        assert goodput[name]["y"] == [pt["goodput_per_s"]["mean"] for pt in drawn]
        cap = p["capacity_per_s"]
        assert f"capacity {'below the lowest rate' if cap is None else f'{cap:g}/s'}" in goodput[name]["name"]
    ttft = page.evaluate(CURVES, "ttft")
    assert sorted(c["name"] for c in ttft) == ["cost p50", "cost p99", "rule p50", "rule p99"]

    # A decision citing it, proposed through the form.
    page.goto(f"{base}/decisions/new")
    page.select_option("#id_recipe", "tiny-cpu")
    page.select_option("#id_policy", "rule")
    page.fill("#id_rationale", "Capacity on the Azure code trace: the rule's padding against its one launch.")
    page.select_option("#id_evidence", [str(job.pk)])
    page.click("#decision-form button[type=submit]")
    page.wait_for_url("**/decisions/*")
    decision = PolicyDecision.objects.get()
    assert list(decision.evidence.values_list("pk", flat=True)) == [job.pk]

    slo = page.text_content("#tradeoff-capacity-parts .capacity-slo")
    assert "TTFT p99 ≤ 2000 ms and ITL p99 ≤ 200 ms" in slo and "deterministic" in slo
    for name, p in policies.items():
        row = page.text_content(f'#tradeoff-capacity-parts table.capacity tr[data-policy="{name}"]')
        cap = p["capacity_per_s"]
        assert ("below the lowest rate" if cap is None else f"{rate_text(cap)} requests/s") in row and "GPU-ms" in row
    assert "stored trace azure-code" in page.text_content("#tradeoff-capacity-parts .capacity-source")
    delta_rows = page.locator("#tradeoff-capacity-parts table.capacity-deltas tbody tr")
    assert delta_rows.count() == 6
    assert all("(deterministic)" in delta_rows.nth(i).text_content() for i in range(6))
    worst = page.locator("#tradeoff-requests-parts table.worst tbody tr")
    assert worst.count() == 20
    assert page.locator("#tradeoff-requests-parts .delta-cdf polyline").count() == 1
    for width, height in ((1280, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(200)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, f"wider than {width} px"
        page.locator("#tradeoff").screenshot(path=str(SHOTS / f"decision-capacity-{width}.png"))

    # The worst request opens /explain on the job's own catalog and execution model.
    first = worst.first
    prompt = first.locator("td").first.text_content()
    first.locator("a").click()
    page.wait_for_url("**/explain?*")
    assert f"prompt_tokens={prompt}" in page.url and f"job={job.pk}" in page.url
    page.wait_for_selector("#plans")
    body = page.text_content("main")
    assert f"job #{job.pk}'s clean catalog" in body and "rule" in body and "cost" in body
