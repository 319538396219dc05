"""The decision's trade-off and evidence checklist over the web: the API on the pull request's
evidence, the page, approval blocked by a required item, comments, rollbacks and boot health."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

from heliosweb.audit.models import AuditEvent
from heliosweb.catalogs.services import boot_create
from heliosweb.decisions import services
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.recipes.models import PolicySetting
from heliosweb.recipes.services import policy_rollback_emergency, recipe_update
from scheduler_core.analyses import ANALYSES
from scheduler_core.catalog import drift
from scheduler_core.comparison import Pair, deltas_of
from scheduler_core.execution import AffineExecution, measured_catalog

from .telemetry_records import body, finished, launch
from .test_decisions import RATIONALE

CLEAN = measured_catalog(AffineExecution())


def evidence_job(recipe: Any, kind: str, **params: Any) -> BenchmarkJob:
    """A done job with the analysis's real result (run here, as the worker would)."""
    analysis = ANALYSES[kind]
    clean = analysis.validate(params)
    result = analysis.run(clean, lambda event: None)
    return BenchmarkJob.objects.create(
        kind=kind, queue="sim", recipe=recipe, params=clean, status="done", result=result
    )


def rate_text(rate: float) -> str:
    """A rate as the decision page prints it (floatformat "-3": three decimals unless whole)."""
    return f"{rate:.0f}" if rate == int(rate) else f"{rate:.3f}"


def api_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_tradeoff_api_reproduces_the_pull_requests_numbers(author, reviewer, recipe):
    jobs = [
        evidence_job(recipe, "pr22"),
        evidence_job(recipe, "sweep", count=8),
        evidence_job(recipe, "fuzz", cases=10),
    ]
    decision = services.decision_propose(
        actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE, evidence=[j.pk for j in jobs]
    )
    body = api_for(reviewer).get(f"/api/decisions/{decision.pk}/tradeoff/").json()
    [pr22] = body["arms"]
    assert pr22["source"] == {
        "job": jobs[0].pk, "kind": "pr22", "recipe": "tiny-cpu", "hardware": None,
        "execution": "the affine cost model (not a GPU)", "traffic": None, "foreign": [], "own": True,
    }  # fmt: skip
    arms = {(a["arm"], a["catalog"]): a for a in pr22["rows"]}
    drifted = arms[("14k", "drift")]
    assert (drifted["cost"]["launches"], drifted["cost"]["ttft_ms"]) == (9, pytest.approx(238.10))
    assert (drifted["rule"]["launches"], drifted["rule"]["ttft_ms"]) == (4, pytest.approx(232.10))
    assert (drifted["repaired"]["launches"], drifted["repaired"]["ttft_ms"]) == (6, pytest.approx(232.10))
    short = arms[("3.5k", "clean")]
    assert (short["cost"]["ttft_ms"], short["rule"]["ttft_ms"], short["delta_ms"]) == (
        pytest.approx(62.10),
        pytest.approx(66.10),
        pytest.approx(4.0),
    )
    assert [s["job"] for s in body["sweep"]] == [jobs[1].pk] and body["fuzz"][0]["policies"]["rule"]["stalls"] == 0
    assert body["boots"] == [] and body["ttft"] == [] and body["numerics"] == [] and body["health"] is None
    assert body["pair"] == {"before": "cost", "after": "rule", "label": "rule − cost"}
    assert body["engine"] is None  # no engine has reported for this recipe
    ticked = {row["item"]: row["jobs"] for row in body["checklist"] if row["done"]}
    assert ticked == {"liveness_fuzzed": [jobs[2].pk]}
    assert body["required"] == [] and body["missing"] == []
    assert api_for(reviewer).get("/api/decisions/999/tradeoff/").status_code == 404


def test_the_decision_page_lays_out_the_tradeoff_and_the_checklist(author, reviewer, recipe, client):
    pr22 = evidence_job(recipe, "pr22")
    decision = services.decision_propose(
        actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE, evidence=[pr22.pk]
    )
    client.force_login(reviewer)
    html = client.get(f"/decisions/{decision.pk}").content.decode()
    row = html.split('data-arm="14k" data-catalog="drift"')[1].split("</tr>")[0]
    assert "9 launches 238.10 ms" in row and "4 launches 232.10 ms" in row and "6 launches 232.10 ms" in row
    assert "No sweep job among the evidence." in html
    checklist = html.split('id="checklist"')[1]
    assert 'data-item="real_ttft" class="open"' in checklist and "real TTFT measured" in checklist


def test_a_rule_to_cost_decision_reads_rule_before_and_cost_after_in_every_delta(author, reviewer, client):
    from heliosweb.recipes.services import recipe_create

    ruled = recipe_create(name="ruled-cpu", policy="rule")
    simulate = evidence_job(ruled, "simulate", requests=40)
    decision = services.decision_propose(
        actor=author, recipe="ruled-cpu", policy="cost", rationale=RATIONALE, evidence=[simulate.pk]
    )
    client.force_login(reviewer)
    html = client.get(f"/decisions/{decision.pk}").content.decode()
    assert "Verdict: rule (before) → cost (after)" in html and "cost − rule" in html
    by_name = {p["policy"]: p for p in simulate.result["policies"]}
    p50 = by_name["cost"]["ttft_ms"]["p50"] - by_name["rule"]["ttft_ms"]["p50"]
    sim = html.split('class="simulate-delta"')[1].split("</p>")[0]
    assert sim.startswith(">cost − rule (difference of percentiles): p50 ") and f"{p50:+.2f} ms" in sim
    worst = html.split('class="worst"')[1].split("</thead>")[0]
    assert worst.index("rule TTFT") < worst.index("cost TTFT") and "The 20 requests cost slows most" in html


def test_the_decision_page_shows_capacity_the_delta_padding_ms_and_the_worst_requests_opening_explain(
    author, reviewer, recipe, client
):
    capacity = evidence_job(
        recipe, "capacity", requests=120, rate_min_per_s=1.0, rate_max_per_s=8.0, steps=3, repeats=3
    )
    simulate = evidence_job(recipe, "simulate", requests=80, catalog="drift")
    decision = services.decision_propose(
        actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE, evidence=[capacity.pk, simulate.pk]
    )
    client.force_login(reviewer)
    html = client.get(f"/decisions/{decision.pk}").content.decode()
    table = html.split('<table class="capacity"')[1].split("</table>")[0]
    for p in capacity.result["policies"]:
        row = table.split(f'data-policy="{p["policy"]}"')[1].split("</tr>")[0]
        cap = p["capacity_per_s"]
        assert ("below the lowest rate" if cap is None else f"{rate_text(cap)} requests/s") in row
        assert "GPU-ms" in row
    deltas = html.split('<table class="capacity-deltas"')[1].split("</table>")[0]
    rows = deltas.split("<tr data-rate=")[1:]
    assert len(rows) == 3 and all("95 %, n=3" in r for r in rows)  # Poisson: an interval over 3 seeds
    first = deltas_of(capacity.result["deltas"][0]["comparisons"], Pair("cost", "rule"))["difference_of_ttft_p50_ms"]
    assert f"[{first['low']:.2f}, {first['high']:.2f}] 95 %" in rows[0]
    sim = html.split('class="simulate-delta"')[1].split("</p>")[0]
    assert "one seeded Poisson draw (seed 0): no interval" in sim
    rule = next(p for p in simulate.result["policies"] if p["policy"] == "rule")
    assert f"{rule['padded_prefill_ms']:.1f} GPU-ms of padding" in html
    # the same requests, per serving job (capacity's, then simulate's): a CDF drawn, the 20 worst, each opening /explain
    assert f'aria-labelledby="delta-cdf-caption-{simulate.pk}"' in html and "<polyline points=" in html
    mine = html.split(f'<div class="part" data-job="{simulate.pk}">')[-1]
    worst = mine.split('class="worst"')[1].split("</table>")[0].split("<tr data-request=")[1:]
    assert len(worst) == 20
    top = simulate.result["deltas"]["worst"][0]
    link = f"/explain?job={simulate.pk}&amp;catalog=drift&amp;prompt_tokens={top['prompt_tokens']}"
    assert link in worst[0] and f"+{top['delta_ms']:.2f} ms" in worst[0]
    explained = client.get(link.replace("&amp;", "&"))
    assert explained.status_code == 200
    assert f"job #{simulate.pk}&#x27;s drift catalog" in explained.content.decode()


def test_a_ttft_measured_on_a_cpu_reads_indicative_not_gpu_timing(author, reviewer, recipe, client):
    arms = [
        {"prompt_tokens": 300, "policy": p, "launch_count": 2, "ttft_ms": 9.0, "predicted_ms": 2.0,
         "ttft_runs_ms": [8.0, 9.0, 14.0]}
        for p in ("cost", "rule")
    ]  # fmt: skip
    result = {"provenance": {"device": "cpu (2 threads)", "mode": "eager-cpu"}, "arms": arms}
    ttft = BenchmarkJob.objects.create(kind="ttft", queue="gpu", recipe=recipe, params={}, status="done", result=result)
    decision = services.decision_propose(
        actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE, evidence=[ttft.pk]
    )
    client.force_login(reviewer)
    html = client.get(f"/decisions/{decision.pk}").content.decode()
    banner = html.split('class="indicative"><strong>')[1].split("</p>")[0]
    assert "Indicative, not GPU timing" in banner and "measured eager-cpu, not on a GPU" in banner
    assert "2 of 2 arms spread more than 10%" in banner
    assert html.count("(indicative, not GPU timing)") == 2 and "3 (67 %)" in html


def served(recipe: Any, *, engine: str, batch: int, version: int, policy: str, ttfts: list[float], chunks: list[int]):
    """One telemetry batch, stored as an engine posts it: a request per TTFT, each prefilling a
    1,000-token prompt in launches of the `chunks` graphs (the last one padded to fill its graph)."""
    from heliosweb.telemetry.ingest import telemetry_ingest

    now, records = time.time() * 1000, []
    for i, ttft in enumerate(ttfts):
        request, start = batch * 1000 + i, 0
        for graph in chunks:
            end = min(start + graph, 1000)
            records.append(
                launch(request, t_ms=now, graph=graph, start=start, end=end, padded=graph - (end - start),
                       chooser=policy, ms=3.0, policy=policy, version=version)
            )  # fmt: skip
            start = end
        records.append(
            finished(request, t_ms=now, prompt_tokens=1000, ttft_ms=ttft, itl_ms=[2.0], launches=chunks,
                     policy=policy, version=version)
        )  # fmt: skip
    recipe.refresh_from_db()
    telemetry_ingest(recipe=recipe, data=body(records, batch, engine=engine))


def test_the_tradeoff_reads_engine_telemetry_per_policy_version(author, reviewer, recipe, client):
    from heliosweb.recipes.services import policy_set

    # v1 cost on two engines: three launches per prompt (512 + 256 + 256, 24 tokens padded), TTFT 12 ms
    served(recipe, engine="eng-1", batch=1, version=1, policy="cost", ttfts=[12.0] * 20, chunks=[512, 256, 256])
    served(recipe, engine="eng-2", batch=1, version=1, policy="cost", ttfts=[12.0] * 20, chunks=[512, 256, 256])
    policy_set(recipe=recipe, policy="rule")  # v2 rule: one 2048 graph per prompt, 1,048 tokens padded
    served(recipe, engine="eng-1", batch=2, version=2, policy="rule", ttfts=[7.0] * 30 + [40.0] * 10, chunks=[2048])
    policy_set(recipe=recipe, policy="cost")  # v3: back to cost, a few requests so far
    served(recipe, engine="eng-1", batch=3, version=3, policy="cost", ttfts=[12.0] * 5, chunks=[512, 256, 256])
    decision = services.decision_propose(actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE)

    engine = api_for(reviewer).get(f"/api/decisions/{decision.pk}/tradeoff/").json()["engine"]
    assert engine["current_version"] == 3 and engine["to_policy"] == "rule" and engine["min_samples"] == 30
    v1, v2, v3 = engine["versions"]
    assert (v1["version"], v1["policy"], v1["engines"], v1["current"], v1["proposed"]) == (
        1, "cost", ["eng-1", "eng-2"], False, False
    )  # fmt: skip
    assert (v1["requests"], v1["launches"], v1["launches_per_request"]) == (40, 120, 3.0)
    # TTFT from the fixed buckets: every 12 ms request in (11, 12], interpolated inside it
    assert (v1["ttft_p50_ms"], v1["ttft_p99_ms"], v1["ttft_mean_ms"]) == (11.5, 11.99, 12.0)
    assert (v1["padded_tokens"], v1["launched_tokens"], v1["padding_share"]) == (40 * 24, 40 * 1024, 0.023)
    assert (v2["policy"], v2["proposed"], v2["requests"], v2["launches"], v2["launches_per_request"]) == (
        "rule", True, 40, 40, 1.0
    )  # fmt: skip
    # 7 ms in (6.6, 7.2]: p50 at 20 of its 30 -> 7.0; 40 ms in (39, 42]: p99 at 9.6 of its 10 -> 41.88
    assert (v2["ttft_p50_ms"], v2["ttft_p99_ms"], v2["ttft_mean_ms"]) == (7.0, 41.88, 15.25)
    assert (v2["padded_tokens"], v2["padding_share"], v2["padding_percent"]) == (40 * 1048, 0.512, 51.2)
    assert (v3["current"], v3["requests"], v3["too_few"]) == (True, 5, True)
    assert engine["latest_by_policy"] == {"cost": 1, "rule": 2}  # v3 has too few requests to stand for cost

    client.force_login(reviewer)
    html = client.get(f"/decisions/{decision.pk}").content.decode()
    section = html.split('id="tradeoff-engine"')[1].split("</table>")[0]
    row = section.split('data-version="2" data-policy="rule"')[1].split("</tr>")[0]
    assert "rule <em>(proposed)</em>" in row and "40 (1.00)" in row and "7.00 ms" in row and "41.88 ms" in row
    assert "51.2 % (41920 of 81920)" in row
    assert "v3 <strong>(current)</strong>" in section and "too few to read much into: under 30" in section
    # The page keeps its rendering of the trade-off, but reads the engines' part on every view.
    served(recipe, engine="eng-1", batch=4, version=3, policy="cost", ttfts=[12.0] * 30, chunks=[512, 256, 256])
    again = client.get(f"/decisions/{decision.pk}").content.decode()
    kept = [page.split('<section id="tradeoff">')[1].split('id="tradeoff-engine"') for page in (html, again)]
    assert kept[1][0] == kept[0][0] and "too few" not in kept[1][1].split("</table>")[0]


def test_approval_answers_409_naming_the_missing_required_item(author, reviewer, recipe):
    recipe_update(recipe=recipe, actor=None, required_evidence=["liveness_fuzzed", "numerics"])
    decision = services.decision_propose(actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE)
    response = api_for(reviewer).post(f"/api/decisions/{decision.pk}/approve/", {}, format="json")
    assert response.status_code == 409
    assert response.json()["field"] == "evidence"
    assert "missing: numerics measured, liveness fuzzed" in response.json()["error"]  # checklist order
    assert AuditEvent.objects.filter(action="refused", actor_name="bob").count() == 1
    decision.refresh_from_db()
    assert decision.status == "pending"


def test_approval_goes_through_once_the_evidence_ticks_the_required_items(author, reviewer, recipe):
    recipe_update(recipe=recipe, actor=None, required_evidence=["liveness_fuzzed"])
    fuzz = evidence_job(recipe, "fuzz", cases=10)
    decision = services.decision_propose(
        actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE, evidence=[fuzz.pk]
    )
    response = api_for(reviewer).post(f"/api/decisions/{decision.pk}/approve/", {}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "approved"


def test_comments_are_plain_text_escaped_in_order_and_audited(author, reviewer, recipe, client):
    Permission.objects.get(codename="comment_decision").user_set.add(author, reviewer)
    decision = services.decision_propose(actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE)
    alice, bob = User.objects.get(pk=author.pk), User.objects.get(pk=reviewer.pk)
    api_for(bob).post(
        f"/api/decisions/{decision.pk}/comments/", {"body": "<script>alert(1)</script> why?"}, format="json"
    )
    services.decision_comment(actor=alice, decision=decision, body="the sweep answers that")
    comments = api_for(bob).get(f"/api/decisions/{decision.pk}/comments/").json()
    assert [(c["author"], c["body"]) for c in comments] == [
        ("bob", "<script>alert(1)</script> why?"),
        ("alice", "the sweep answers that"),
    ]
    client.force_login(bob)
    html = client.get(f"/decisions/{decision.pk}").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; why?" in html and "<script>alert(1)" not in html
    timeline = html.split('id="timeline"')[1].split("</ol>")[0]
    assert timeline.index("proposed") < timeline.index("why?") < timeline.index("the sweep answers")
    assert AuditEvent.objects.filter(action="commented", object_id=str(decision.pk)).count() == 2
    empty = api_for(bob).post(f"/api/decisions/{decision.pk}/comments/", {"body": "  "}, format="json")
    assert (empty.status_code, empty.json()["field"]) == (400, "body")


def test_a_rollback_is_a_new_decision_prefilled_from_an_applied_one(author, reviewer, recipe, client):
    decision = services.decision_propose(actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE)
    services.decision_apply(actor=author, decision=services.decision_approve(actor=reviewer, decision=decision))
    client.force_login(author)
    assert (
        f'href="/decisions/new?rollback_of={decision.pk}"' in client.get(f"/decisions/{decision.pk}").content.decode()
    )
    form = client.get(f"/decisions/new?rollback_of={decision.pk}")
    assert form.context["values"]["policy"] == "cost" and form.context["values"]["recipe"] == "tiny-cpu"
    assert f"Roll back decision #{decision.pk}" in form.context["values"]["rationale"]
    response = client.post(
        "/decisions/new",
        {"recipe": "tiny-cpu", "policy": "cost", "rationale": "rolling back", "rollback_of": str(decision.pk)},
    )
    assert response.status_code == 302
    rollback = decision.rollbacks.get()
    assert (rollback.from_policy, rollback.to_policy, rollback.base_version) == ("rule", "cost", 2)
    pending = services.decision_propose(actor=author, recipe="tiny-cpu", policy="cost", rationale="x")
    with pytest.raises(Exception, match="not an applied decision"):
        services.decision_propose(actor=author, recipe="tiny-cpu", policy="cost", rationale="x", rollback_of=pending.pk)


def test_an_emergency_rollback_shows_a_banner_until_a_follow_up_decision_is_reviewed(author, reviewer, recipe, client):
    decision = services.decision_propose(actor=author, recipe="tiny-cpu", policy="rule", rationale=RATIONALE)
    services.decision_apply(actor=author, decision=services.decision_approve(actor=reviewer, decision=decision))
    olga = User.objects.create_user("olga")
    olga.user_permissions.add(Permission.objects.get(codename="rollback_policy"))
    policy_rollback_emergency(
        recipe=recipe, actor=User.objects.get(pk=olga.pk), reason="p99 TTFT doubled", from_version=2
    )
    client.force_login(reviewer)
    for url in ("/", "/recipes/tiny-cpu"):
        banner = client.get(url).content.decode().split('class="banner emergency"')[1].split("</div>")[0]
        assert (
            "Emergency rollback of" in banner and "reverted from rule to cost (v3) at once, without approval" in banner
        )
        assert "by olga on " in banner and "“p99 TTFT doubled”" in banner and "propose a follow-up decision" in banner
    assert api_for(reviewer).get("/api/recipes/").json()[0]["emergency"]["reason"] == "p99 TTFT doubled"
    follow_up = services.decision_propose(actor=author, recipe="tiny-cpu", policy="rule", rationale="reviewed")
    services.decision_reject(actor=reviewer, decision=follow_up, reason="keep cost until the drift is fixed")
    assert PolicySetting.objects.get(recipe=recipe).emergency is None
    assert "Emergency rollback of" not in client.get("/").content.decode()


def test_the_boots_api_gives_each_boot_a_health_object(recipe, reviewer):
    for seed in range(3):
        boot_create(recipe=recipe, catalog=CLEAN.replace_ms(lambda g, s=seed: g.ms * (1 + 0.01 * s)).to_dicts())
    bad = boot_create(recipe=recipe, catalog=drift(CLEAN, 4096, 1.6).to_dicts())
    boots = {b["id"]: b for b in api_for(reviewer).get("/api/recipes/tiny-cpu/boots/").json()}
    assert boots[bad.pk]["health"]["status"] == "flagged"
    [flag] = boots[bad.pk]["health"]["flagged"]
    assert (flag["prefill"], flag["decode"], flag["ratio"]) == (4096, 0, pytest.approx(1.6, rel=0.03))
    assert flag["reason"].startswith("outlier")
    assert all(b["health"] == {**b["health"], "status": "ok", "flagged": []} for pk, b in boots.items() if pk != bad.pk)


def test_a_job_can_plan_with_a_repaired_boot(recipe, author, queued):
    from heliosweb.jobs.services.submission import job_create

    for seed in range(3):
        boot_create(recipe=recipe, catalog=CLEAN.replace_ms(lambda g, s=seed: g.ms * (1 + 0.01 * s)).to_dicts())
    bad = boot_create(recipe=recipe, catalog=drift(CLEAN, 4096, 1.6).to_dicts())
    job = job_create(kind="sweep", recipe="tiny-cpu", params={"boot_catalog": {"boot": bad.pk, "repaired": True}})
    planned = {g["prefill"]: g["ms"] for g in job.params["boot_catalog"]}
    assert planned[4096] == pytest.approx(CLEAN.prefill_ms[4096] * 1.01)  # the median of the three others
    assert planned[2048] == bad.catalog[5]["ms"]
    with pytest.raises(Exception, match="repaired"):
        job_create(kind="sweep", params={"boot_catalog": {"boot": bad.pk, "repaired": "yes"}})


def test_a_job_on_a_repaired_boot_keeps_and_shows_where_its_catalog_came_from(recipe, author, queued, client):
    from heliosweb.jobs.services.submission import job_create

    clean = [
        boot_create(recipe=recipe, catalog=CLEAN.replace_ms(lambda g, s=seed: g.ms * (1 + 0.01 * s)).to_dicts())
        for seed in range(3)
    ]
    bad = boot_create(recipe=recipe, catalog=drift(CLEAN, 4096, 1.6).to_dicts())
    job = job_create(kind="sweep", recipe="tiny-cpu", params={"boot_catalog": {"boot": bad.pk, "repaired": True}})
    [source] = job.catalog_sources["boot_catalog"]
    assert (source["boot"], source["repaired"]) == (bad.pk, True)
    [r] = source["replaced"]
    assert (r["prefill"], r["decode"], r["was_ms"], r["ms"]) == (4096, 0, pytest.approx(105.6), pytest.approx(66.66))
    assert r["from_boots"] == [b.pk for b in clean] and r["source"] == "median of 3 other boots"
    assert r["ratio"] == pytest.approx(1.6, rel=0.03)
    assert set(job.params) == set(ANALYSES["sweep"].validate({}))  # the analysis's params stay what it validates

    body = api_for(author).get(f"/api/jobs/{job.pk}/").json()
    assert body["catalog_sources"] == {"boot_catalog": [source]}
    assert api_for(author).get("/api/jobs/").json()[0]["catalog_sources"] is None  # lists stay light

    client.force_login(author)
    page = client.get(f"/jobs/{job.pk}").content.decode()
    ids = ", ".join(f"#{b.pk}" for b in clean)
    assert (
        f'boot_catalog: <a href="/recipes/tiny-cpu?boot={bad.pk}#boot-{bad.pk}">boot #{bad.pk}</a>, repaired: 4096 replaced by the median of boots {ids} (105.60 → 66.66 ms; '
        f"{r['ratio']:.2f}x → " in page
    )


def test_a_job_on_a_stored_boot_says_which_and_a_spelled_out_catalog_says_nothing(recipe, author, queued, client):
    from heliosweb.jobs.services.submission import job_create

    boot = boot_create(recipe=recipe, catalog=CLEAN.to_dicts())
    named = job_create(kind="sweep", recipe="tiny-cpu", params={"boot_catalog": {"boot": boot.pk}})
    assert named.catalog_sources == {"boot_catalog": [{"boot": boot.pk, "repaired": False}]}
    healthy = job_create(kind="sweep", recipe="tiny-cpu", params={"boot_catalog": {"boot": boot.pk, "repaired": True}})
    assert healthy.catalog_sources == {"boot_catalog": [{"boot": boot.pk, "repaired": True, "replaced": []}]}
    inline = job_create(kind="sweep", recipe="tiny-cpu", params={"boot_catalog": CLEAN.to_dicts()})
    assert inline.catalog_sources == {}

    client.force_login(author)
    link = f'<a href="/recipes/tiny-cpu?boot={boot.pk}#boot-{boot.pk}">boot #{boot.pk}</a>'
    assert f"boot_catalog: {link} as stored" in client.get(f"/jobs/{named.pk}").content.decode()
    page = client.get(f"/jobs/{healthy.pk}").content.decode()
    assert f"boot_catalog: {link}, repaired: nothing flagged, so as stored" in page
    newer = [boot_create(recipe=recipe, catalog=CLEAN.to_dicts()).pk for _ in range(20)]
    listed = client.get("/recipes/tiny-cpu").content.decode()
    assert f'<tr id="boot-{newer[0]}"' in listed and f'<tr id="boot-{boot.pk}"' not in listed  # the 20 newest
    linked = client.get(f"/recipes/tiny-cpu?boot={boot.pk}").content.decode()
    assert f'<tr id="boot-{boot.pk}"' in linked  # and, linked from a job page, the older one too
    assert client.get("/recipes/tiny-cpu?boot=99999999999999999999").status_code == 200  # a bad id is ignored
    assert "Catalogs from stored boots" not in client.get(f"/jobs/{inline.pk}").content.decode()


A100_RATES = {"rate_min_per_s": 0.5, "rate_max_per_s": 4.0, "steps": 3}


def test_an_a100_decision_shows_each_cited_job_with_its_hardware_and_never_the_h100_as_the_recipes(
    author, reviewer, client
):
    from heliosweb.recipes.services import recipe_create

    a100 = recipe_create(name="llama-a100", policy="cost", hardware="A100")
    h100_cap = evidence_job(a100, "capacity", execution="llama-2-7b-h100", requests=40, **A100_RATES)
    a100_cap = evidence_job(a100, "capacity", execution="llama-2-7b-a100", requests=40, **A100_RATES)
    h100_sim = evidence_job(a100, "simulate", execution="llama-2-7b-h100", requests=40, rate_per_s=2.0)
    decision = services.decision_propose(
        actor=author, recipe="llama-a100", policy="rule", rationale=RATIONALE,
        evidence=[h100_cap.pk, a100_cap.pk, h100_sim.pk],
    )  # fmt: skip
    body = api_for(reviewer).get(f"/api/decisions/{decision.pk}/tradeoff/").json()
    caps = [(c["job"], c["source"]["hardware"], c["source"]["own"]) for c in body["capacity"]]
    assert caps == [(a100_cap.pk, "A100", True), (h100_cap.pk, "H100", False)]
    assert [c["job"] for c in body["verdict"]["capacity"]] == [a100_cap.pk]
    assert body["verdict"]["delta"] == [d for d in body["verdict"]["delta"] if d["job"] == a100_cap.pk]
    client.force_login(reviewer)
    html = client.get(f"/decisions/{decision.pk}").content.decode()
    verdict = html.split('id="verdict"')[1].split("</section>")[0]
    a100_caps = {p["policy"]: p["capacity_per_s"] for p in a100_cap.result["policies"]}
    line = verdict.split('class="verdict-capacity"')[1].split("</li>")[0]
    assert f"job #{a100_cap.pk}, A100" in line and f"job #{h100_cap.pk}" not in line
    assert (a100_caps["cost"] is None) or f"cost {rate_text(a100_caps['cost'])}/s" in line
    vouch = verdict.split('id="cannot-vouch"')[1]
    for job in (h100_cap, h100_sim):
        assert f"job #{job.pk} ran on H100, not this recipe&#x27;s A100" in vouch
    for job in (h100_cap, h100_sim):  # each H100 part opens with its banner, under its own source line
        part = html.split(f'data-job="{job.pk}">')[1]
        assert part.lstrip().startswith('<p class="banner foreign" role="note"><strong>Not this recipe')
        assert 'hardware <span class="hardware">H100</span>' in part.split("</p>")[1]
    own = html.split(f'<div class="part" data-job="{a100_cap.pk}">')[1].split("</div>")[0]
    assert "banner foreign" not in own and 'hardware <span class="hardware">A100</span>' in own


def test_a_third_policy_declared_in_a_test_appears_in_every_delta_and_on_the_decision_page(
    author, reviewer, recipe, client, monkeypatch
):
    from scheduler_core.policies import POLICIES

    from ..scheduler_core.test_evidence_bound import FirstGraphPolicy

    monkeypatch.setitem(POLICIES, FirstGraphPolicy.name, FirstGraphPolicy)
    policies = ["cost", "smallest"]
    jobs = [
        evidence_job(recipe, "sweep", count=8, policies=policies),
        evidence_job(recipe, "simulate", requests=40, policies=policies),
        evidence_job(recipe, "capacity", requests=40, policies=policies, **A100_RATES),
    ]
    decision = services.decision_propose(
        actor=author, recipe="tiny-cpu", policy="smallest", rationale=RATIONALE, evidence=[j.pk for j in jobs]
    )
    client.force_login(reviewer)
    html = client.get(f"/decisions/{decision.pk}").content.decode()
    assert "Verdict: cost (before) → smallest (after)" in html
    assert "smallest wins" in html.split('id="tradeoff-sweep"')[1].split("</ul>")[0]
    assert "smallest − cost (difference of percentiles): p50" in html.split('class="simulate-delta"')[1]
    deltas = html.split('<table class="capacity-deltas"')[1].split("</table>")[0]
    assert "smallest − cost TTFT p50" in deltas and len(deltas.split("<tr data-rate=")) == 4
    worst = html.split('class="worst"')[1].split("</thead>")[0]
    assert "smallest TTFT" in worst and "cost TTFT" in worst and "smallest − cost" in worst
    assert "smallest − cost TTFT at" in html.split('id="verdict"')[1]
    assert "rule" not in html.split('id="verdict"')[1].split("</section>")[0]
