"""Pages: login, the generated job form, the job page, compare, the dashboard's query count."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders

from heliosweb.jobs.models import BenchmarkJob

from .runs import REQUIRED


@pytest.fixture
def browser_client(client, maintainer):
    client.force_login(maintainer)
    return client


def test_pages_need_a_login(client, db):
    for url in ("/", "/jobs/", "/jobs/new", "/compare"):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_job_form_is_generated_from_declared_params(browser_client):
    html = browser_client.get("/jobs/new").content.decode()
    for name in ("pr22.fixed_ms", "pr22.ms_per_token", "pr22.first_token_ms", "pr22.drift_factor", "pulse.count"):
        assert f'name="{name}"' in html


def test_non_maintainers_cannot_open_the_form(client, viewer):
    client.force_login(viewer)
    assert client.get("/jobs/new").status_code == 403
    assert client.post("/jobs/new", {"kind": "pr22"}).status_code == 403


def test_a_bad_form_shows_the_field_error_and_stores_nothing(browser_client, queued):
    response = browser_client.post("/jobs/new", {"kind": "pr22", "pr22.drift_factor": "1000"})
    assert response.status_code == 400
    assert 'data-field="pr22.drift_factor"' in response.content.decode()
    assert BenchmarkJob.objects.count() == 0 and queued == []
    response = browser_client.post("/jobs/new", {"kind": "pr22", "pr22.fixed_ms": "abc"})
    assert 'data-field="pr22.fixed_ms"' in response.content.decode()
    response = browser_client.post("/jobs/new", {"kind": "ghost"})
    assert 'data-field="kind"' in response.content.decode()
    assert BenchmarkJob.objects.count() == 0


def test_a_good_form_queues_the_job_and_opens_its_page(
    browser_client, recipe, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = browser_client.post("/jobs/new", {"kind": "pr22", "recipe": "tiny-cpu", "pr22.drift_factor": "1.6"})
    job = BenchmarkJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}"
    assert queued == [(job.pk, "sim")]
    page = browser_client.get(f"/jobs/{job.pk}").content.decode()
    assert f'data-ws-path="/ws/jobs/{job.pk}/"' in page and "vendor/plotly/plotly-basic.min.js" in page
    assert browser_client.get("/jobs/4242").status_code == 404


def test_the_dashboard_uses_a_bounded_number_of_queries(
    browser_client, maintainer, recipe, django_assert_max_num_queries
):
    BenchmarkJob.objects.bulk_create(
        BenchmarkJob(kind="pr22", queue="sim", recipe=recipe, created_by=maintainer) for _ in range(120)
    )
    with django_assert_max_num_queries(8):
        response = browser_client.get("/")
    assert response.status_code == 200 and "tiny-cpu" in response.content.decode()


def test_compare_shows_finished_jobs_side_by_side(browser_client, maintainer, transactional_db):
    from heliosweb.jobs.services.runner import job_run
    from heliosweb.jobs.services.submission import job_create

    a = job_create(kind="pr22", user=maintainer)
    b = job_create(kind="pr22", params={"drift_factor": 2.0}, user=maintainer)
    job_run(job_id=a.pk)
    job_run(job_id=b.pk)
    html = browser_client.get(f"/compare?ids={a.pk},{b.pk}").content.decode()
    assert "9 launches 238.10 ms" in html and 'id="figures"' in html
    bad = browser_client.get(f"/compare?ids={a.pk}")
    assert bad.status_code == 400 and 'data-field="ids"' in bad.content.decode()


def test_compare_shows_other_kinds_as_their_text_tables(browser_client, maintainer, transactional_db):
    from heliosweb.jobs.services.runner import job_run
    from heliosweb.jobs.services.submission import job_create

    jobs = [job_create(kind="fuzz", params={"cases": 50, "seed": seed}, user=maintainer) for seed in (1, 2)]
    for job in jobs:
        job_run(job_id=job.pk)
    html = browser_client.get(f"/compare?ids={jobs[0].pk},{jobs[1].pk}").content.decode()
    assert (
        html.count('<pre class="result-text" tabindex="0">50 random cases') == 2
        and "seed 1" in html
        and "seed 2" in html
    )


def test_plotly_is_the_vendored_partial_bundle_not_a_cdn():
    assert finders.find("vendor/plotly/plotly-basic.min.js") and finders.find("vendor/plotly/LICENSE")
    import pathlib

    ours = [p for p in pathlib.Path("static").rglob("*.js") if "vendor" not in p.parts]
    for path in list(pathlib.Path("templates").rglob("*.html")) + ours:
        assert "cdn" not in path.read_text().lower(), path
    # The vendored bundle too (its topojsonURL default edited as static/vendor/plotly/README.md says).
    for path in pathlib.Path("static/vendor").rglob("*"):
        if path.is_file():
            assert "cdn." not in path.read_text().lower(), path


def test_every_registered_kind_gets_a_form_that_posts_its_defaults(
    browser_client, recipe, queued, django_capture_on_commit_callbacks
):
    """Each kind's generated fields, posted untouched, make a valid job (defaults round-trip)."""
    import re

    from heliosweb.jobs.registry import job_kinds

    html = browser_client.get("/jobs/new").content.decode()
    for name, kind in job_kinds().items():
        data = {"kind": name, "recipe": "tiny-cpu"}
        for p in kind.analysis.params:
            field = f"{name}.{p.name}"
            if p.kind == "choice_list":
                data[field] = list(p.default_value())
            elif p.kind in ("int", "float", "int_list", "choice"):
                match = re.search(rf'name="{re.escape(field)}" value="([^"]*)"', html)
                if match:
                    data[field] = match.group(1)
        data |= {f"{name}.{k}": v for k, v in REQUIRED.get(name, {}).items()}  # pasted, as a person would
        with django_capture_on_commit_callbacks(execute=True):
            response = browser_client.post("/jobs/new", data)
        assert response.status_code == 302, (name, response.content.decode()[:2000])


def test_the_form_offers_stored_boots_for_catalog_parameters_and_uses_the_picked_ones(
    browser_client, recipe, queued, django_capture_on_commit_callbacks
):
    from heliosweb.catalogs.services import boot_create
    from scheduler_core.catalog import noise
    from scheduler_core.execution import AffineExecution, measured_catalog

    clean = measured_catalog(AffineExecution())
    boots = [
        boot_create(
            recipe=recipe,
            catalog=noise(clean, seed=s, sigma=0.1).to_dicts(),
            provenance={"device": "NVIDIA H200", "mode": "cuda-graph"},
        )
        for s in range(2)
    ]
    html = browser_client.get("/jobs/new?kind=boots").content.decode()
    assert (
        'name="boots.boot_catalogs.boots"' in html and f"#{boots[0].pk} · tiny-cpu · NVIDIA H200 (cuda-graph)" in html
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = browser_client.post(
            "/jobs/new",
            {"kind": "boots", "boots.boot_catalogs.boots": [b.pk for b in boots], "boots.policies": ["cost", "rule"]},
        )
    assert response.status_code == 302
    job = BenchmarkJob.objects.get()
    assert job.params["boot_catalogs"] == [boots[0].catalog, boots[1].catalog]


def test_the_form_offers_the_repaired_version_of_a_picked_boot(
    browser_client, recipe, queued, django_capture_on_commit_callbacks
):
    from heliosweb.catalogs.services import boot_create
    from scheduler_core.catalog import drift
    from scheduler_core.execution import AffineExecution, measured_catalog

    clean = measured_catalog(AffineExecution())
    for s in range(3):
        boot_create(recipe=recipe, catalog=clean.replace_ms(lambda g, s=s: g.ms * (1 + 0.01 * s)).to_dicts())
    bad = boot_create(recipe=recipe, catalog=drift(clean, 4096, 1.6).to_dicts())
    page = browser_client.get("/recipes/tiny-cpu").content.decode()
    assert f"/jobs/new?kind=sweep&amp;boot={bad.pk}&amp;repaired=1" in page  # flagged: offered repaired
    assert page.count("&amp;repaired=1") == 2  # sweep and simulate, for the one flagged boot only
    form = browser_client.get(f"/jobs/new?kind=sweep&boot={bad.pk}&repaired=1").content.decode()
    assert 'name="sweep.boot_catalog.repaired" id="id_sweep.boot_catalog.repaired"' in form
    assert re.search(r'<input type="checkbox" name="sweep\.boot_catalog\.repaired"[^>]* checked', form)
    assert 'name="boots.boot_catalogs.repaired"' in form  # catalog lists too
    plain = browser_client.get(f"/jobs/new?kind=sweep&boot={bad.pk}").content.decode()
    assert not re.search(r'name="sweep\.boot_catalog\.repaired"[^>]* checked', plain)

    sweep = {"kind": "sweep", "sweep.policies": ["cost", "rule"], "sweep.catalogs": ["clean"]}
    with django_capture_on_commit_callbacks(execute=True):
        response = browser_client.post(
            "/jobs/new", {**sweep, "sweep.boot_catalog.boots": str(bad.pk), "sweep.boot_catalog.repaired": "on"}
        )
    assert response.status_code == 302
    planned = {g["prefill"]: g["ms"] for g in BenchmarkJob.objects.get().params["boot_catalog"]}
    assert planned[4096] == pytest.approx(clean.prefill_ms[4096] * 1.01)  # the median of the three others
    assert planned[2048] == clean.prefill_ms[2048]

    response = browser_client.post("/jobs/new", {**sweep, "sweep.boot_catalog.repaired": "on"})
    assert response.status_code == 400
    assert "the repaired version is of a stored boot: pick one" in response.content.decode()
    response = browser_client.post(  # back with an error: the picked boot and the box kept
        "/jobs/new",
        {
            **sweep,
            "sweep.catalogs": ["ghost"],
            "sweep.boot_catalog.boots": str(bad.pk),
            "sweep.boot_catalog.repaired": "on",
        },
    )
    again = response.content.decode()
    assert response.status_code == 400 and f'<option value="{bad.pk}" selected>' in again
    assert re.search(r'name="sweep\.boot_catalog\.repaired"[^>]* checked', again)
    assert BenchmarkJob.objects.count() == 1


def test_picking_a_boot_that_no_longer_exists_names_the_field(browser_client, recipe, queued):
    response = browser_client.post(
        "/jobs/new",
        {
            "kind": "sweep",
            "sweep.boot_catalog.boots": "4242",
            "sweep.policies": ["cost", "rule"],
            "sweep.catalogs": ["clean"],
        },
    )
    assert response.status_code == 400 and 'data-field="sweep.boot_catalog"' in response.content.decode()
    assert "no stored boot 4242" in response.content.decode() and not BenchmarkJob.objects.exists()


def test_the_dashboard_lists_open_decisions_and_not_settled_ones(browser_client, recipe, author, reviewer):
    from heliosweb.decisions import services as decisions

    waiting = decisions.decision_propose(actor=author, recipe="tiny-cpu", policy="rule", rationale="PR #22 arms")
    withdrawn = decisions.decision_propose(actor=reviewer, recipe="tiny-cpu", policy="rule", rationale="duplicate")
    decisions.decision_withdraw(actor=reviewer, decision=withdrawn)
    html = browser_client.get("/").content.decode()
    assert f'href="/decisions/{waiting.pk}"' in html and f'href="/decisions/{withdrawn.pk}"' not in html


def test_a_recipe_page_lists_its_boots_decisions_and_jobs_and_links_each_boot_to_an_analysis(
    browser_client, recipe, author
):
    from heliosweb.catalogs.services import boot_create
    from heliosweb.decisions import services as decisions
    from scheduler_core.execution import AffineExecution, measured_catalog

    boot = boot_create(
        recipe=recipe,
        catalog=measured_catalog(AffineExecution()).to_dicts(),
        provenance={"device": "NVIDIA H200", "mode": "cuda-graph"},
    )
    decision = decisions.decision_propose(actor=author, recipe="tiny-cpu", policy="rule", rationale="PR #22 arms")
    BenchmarkJob.objects.create(kind="pr22", queue="sim", recipe=recipe)
    html = browser_client.get("/recipes/tiny-cpu").content.decode()
    assert f'data-boot="{boot.pk}"' in html and "NVIDIA H200" in html and "66.000" in html
    assert f'href="/decisions/{decision.pk}"' in html and "data-job=" in html
    assert f"/jobs/new?kind=sweep&amp;boot={boot.pk}" in html
    form = browser_client.get(f"/jobs/new?kind=sweep&boot={boot.pk}").content.decode()
    assert f'<option value="{boot.pk}" selected>' in form
    assert browser_client.get("/recipes/ghost").status_code == 404


def test_a_deliberately_drifted_boot_is_marked_on_its_recipe_page_and_in_the_boot_picker(browser_client, recipe):
    from heliosweb.catalogs.services import boot_create

    catalog = [{"prefill": 64, "decode": 0, "ms": 1.0}, {"prefill": 128, "decode": 0, "ms": 9.0}]
    drifted = boot_create(
        recipe=recipe,
        catalog=catalog,
        provenance={"device": "cpu", "mode": "eager-cpu", "drift": {"capacities": [128], "load": 2}},
    )
    clean = boot_create(
        recipe=recipe, catalog=catalog, provenance={"device": "cpu", "mode": "eager-cpu", "drift": None}
    )
    page = browser_client.get("/recipes/tiny-cpu").content.decode()
    rows = {pk: page[page.index(f'data-boot="{pk}"') :].split("</tr>")[0] for pk in (drifted.pk, clean.pk)}
    assert "drifted 128" in rows[drifted.pk] and "drifted" not in rows[clean.pk]
    form = browser_client.get("/jobs/new?kind=sweep").content.decode()
    assert f"#{drifted.pk} · tiny-cpu · cpu (eager-cpu)" in form and "shapes · drifted 128 · health ok</option>" in form


TRACE_JSONL = "\n".join(
    f'{{"arrival_ms": {i * 150}, "prompt_tokens": {100 + 37 * i}, "output_tokens": {1 + i % 5}}}' for i in range(30)
)


def test_the_form_takes_an_execution_profile_a_pasted_trace_and_a_window(
    browser_client, recipe, queued, django_capture_on_commit_callbacks
):
    html = browser_client.get("/jobs/new?kind=capacity").content.decode()
    for kind in ("pr22", "sweep", "boots", "simulate", "capacity"):
        assert f'name="{kind}.execution"' in html
    assert '<option value="llama-2-7b-a100">' in html and 'name="capacity.trace"' in html
    data = {
        "kind": "capacity",
        "recipe": "tiny-cpu",
        "capacity.execution": "llama-2-7b-h100",
        "capacity.trace": TRACE_JSONL,
        "capacity.window": "0:3",
        "capacity.steps": "2",
        "capacity.policies": ["cost", "rule"],
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = browser_client.post("/jobs/new", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    job = BenchmarkJob.objects.get()
    assert job.params["execution"] == "llama-2-7b-h100" and job.params["window"] == [0.0, 3.0]
    assert [r["prompt_tokens"] for r in job.params["trace"]] == [100 + 37 * i for i in range(30)]
    assert queued == [(job.pk, "sim")]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("execution", "llama-2-7b-v100", "must be one of"),
        (
            "trace",
            TRACE_JSONL + '\n{"arrival_ms": 1, "prompt_tokens": "x", "output_tokens": 1}',
            "line 31, column prompt_tokens",
        ),
        ("window", "5", "START:END"),
        ("window", "9:3", "start 9 must be"),
    ],
)
def test_a_bad_profile_trace_or_window_is_refused_at_its_field(browser_client, recipe, queued, field, value, says):
    data = {"kind": "simulate", "simulate.trace": TRACE_JSONL, f"simulate.{field}": value}
    response = browser_client.post("/jobs/new", data)
    page = response.content.decode()
    assert response.status_code == 400 and f'data-field="simulate.{field}"' in page
    assert says in page
    assert BenchmarkJob.objects.count() == 0 and queued == []
