"""A maintainer in Debian's Chromium: log in, start a pr22 job, watch it reach 100 % and its TTFT
figure show the pull request's eight numbers; start a drifted capture and see a bar per graph, the
drifted one marked."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User

from heliosweb.jobs.models import BenchmarkJob

from .conftest import log_in_and_open, needs_chromium

EIGHT = ["3 / 62.10", "1 / 66.10", "3 / 62.10", "1 / 66.10", "6 / 232.10", "4 / 232.10", "9 / 238.10", "4 / 232.10"]

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]


def _maintainer() -> None:
    group, _ = Group.objects.get_or_create(name="maintainers")
    group.permissions.add(Permission.objects.get(codename="run_jobs"))
    User.objects.create_user("browser-maint", password="pw-browser-123").groups.add(group)


def test_a_maintainer_starts_pr22_and_watches_it_finish_with_the_eight_figures(stack, page):
    _maintainer()
    stack.start_web()

    log_in_and_open(page, f"{stack.base_url}/jobs/new", "browser-maint", "pw-browser-123")
    page.select_option("#id_kind", "pr22")
    page.click("#start-job")
    page.wait_for_url("**/jobs/*")

    page.wait_for_function("document.getElementById('job-progress').value === 100")
    page.wait_for_function("document.getElementById('job-status').textContent === 'done'")
    page.wait_for_function(
        "(() => { const el = document.querySelector('[data-figure-id=ttft]');"
        " return el && el.data && el.data.length === 2 && el.data[0].x.length === 4; })()"
    )
    assert _pr22_numbers(page) == EIGHT
    assert page.text_content("#job-percent") == "100%"

    # A reload draws the same figure from the stored result.
    stored_events = BenchmarkJob.objects.get().events.count()
    page.reload()
    page.wait_for_function(
        f"document.getElementById('event-count').textContent === '{stored_events}'"
        " && !document.getElementById('result').hidden && document.getElementById('figures').dataset.loaded"
    )
    assert _pr22_numbers(page) == EIGHT


def _pr22_numbers(page) -> list[str]:
    """The bars' 'launches / ms' labels, cost then rule per arm, read from the plot's own data."""
    cost, rule = page.eval_on_selector("[data-figure-id=ttft]", "el => el.data.map(t => Array.from(t.text))")
    return [x for pair in zip(cost, rule) for x in pair]


def test_a_drifted_capture_shows_a_bar_per_graph_with_the_drifted_one_marked(stack, page, recipe):
    _maintainer()
    stack.start_web()

    log_in_and_open(page, f"{stack.base_url}/jobs/new?kind=capture", "browser-maint", "pw-browser-123")
    page.select_option("select[name=recipe]", recipe.name)
    page.fill("input[name='capture.capacities']", "16, 32")
    page.select_option("select[name='capture.graphs']", "prefill")
    page.fill("input[name='capture.repeats']", "2")
    page.fill("input[name='capture.drift_capacities']", "32")
    page.click("#start-job")
    page.wait_for_url("**/jobs/*")
    page.wait_for_function("document.getElementById('job-status').textContent === 'done'", timeout=120_000)

    def hatching() -> list[str]:
        shapes = "Array.from(document.querySelector('[data-figure-id=shapes]').data[0].marker.pattern.shape || [])"
        page.wait_for_function(f"document.getElementById('figures').dataset.loaded && {shapes}.length === 2")
        return page.evaluate(shapes)

    colors = hatching()
    assert colors == ["", "x"], colors
    # A reload replays the stored measurements: still one bar per graph.
    stored_events = BenchmarkJob.objects.get().events.count()
    page.reload()
    page.wait_for_function(
        f"document.getElementById('event-count').textContent === '{stored_events}'"
        " && !document.getElementById('result').hidden"
    )
    assert hatching() == colors


def test_a_maintainer_picks_the_repaired_version_of_a_flagged_boot(stack, page, recipe):
    from pathlib import Path

    from heliosweb.catalogs.models import Boot
    from heliosweb.catalogs.services import boot_create
    from scheduler_core.catalog import drift
    from scheduler_core.execution import AffineExecution, measured_catalog

    clean = measured_catalog(AffineExecution())
    for s in range(3):
        boot_create(recipe=recipe, catalog=clean.replace_ms(lambda g, s=s: g.ms * (1 + 0.01 * s)).to_dicts())
    bad = boot_create(recipe=recipe, catalog=drift(clean, 4096, 1.6).to_dicts())
    _maintainer()
    stack.start_web()  # the `stack` fixture already runs a worker

    log_in_and_open(page, f"{stack.base_url}/jobs/new?kind=sweep", "browser-maint", "pw-browser-123")
    box = page.locator('[id="id_sweep.boot_catalog.repaired"]')
    assert box.is_visible() and box.is_disabled()  # nothing picked: nothing to repair
    label = page.locator(f'[id="id_sweep.boot_catalog.boots"] option[value="{bad.pk}"]').text_content()
    assert label.endswith("flagged 4096")
    page.select_option('[id="id_sweep.boot_catalog.boots"]', str(bad.pk))
    assert box.is_enabled()
    box.check()
    shots = Path(__file__).resolve().parents[2] / "var" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.locator('fieldset[data-kind="sweep"]').screenshot(path=str(shots / "job-form-repaired.png"))
    page.select_option('[id="id_sweep.boot_catalog.boots"]', "")
    assert box.is_disabled() and not box.is_checked()  # unpicking the boot clears the box
    page.select_option('[id="id_sweep.boot_catalog.boots"]', str(bad.pk))
    box.check()
    page.click("#start-job")
    page.wait_for_url("**/jobs/*")
    planned = {g["prefill"]: g["ms"] for g in BenchmarkJob.objects.get().params["boot_catalog"]}
    assert planned[4096] == pytest.approx(clean.prefill_ms[4096] * 1.01)  # the median of the three others

    # The job page says where its catalog came from, in one line.
    page.wait_for_function("document.getElementById('job-status').textContent === 'done'", timeout=120_000)
    source = page.text_content("#catalog-sources li")
    others = sorted(b.pk for b in Boot.objects.exclude(pk=bad.pk))
    assert source.startswith(
        f"boot_catalog: boot #{bad.pk}, repaired: 4096 replaced by the median of boots "
        + ", ".join(f"#{b}" for b in others)
        + " (105.60 → 66.66 ms;"
    )
    page.click(f"#catalog-sources a[href$='#boot-{bad.pk}']")  # the boot is a link to its row
    page.wait_for_url(f"**/recipes/{recipe.name}?boot={bad.pk}#boot-{bad.pk}")
    assert page.locator(f"tr#boot-{bad.pk}").is_visible()
    page.screenshot(path=str(shots / "recipe-boot-linked.png"))
    page.go_back()
    page.screenshot(path=str(shots / "job-on-repaired-boot.png"), full_page=True)
    page.locator("#catalog-sources").screenshot(path=str(shots / "job-catalog-sources.png"))

    # The recipe page's simulated engine offers the latest boot repaired.
    page.goto(f"{stack.base_url}/recipes/{recipe.name}")
    options = page.locator("#engine-catalog option").all_text_contents()
    assert f"latest boot #{bad.pk} repaired (1 flagged shape replaced)" in [o.strip() for o in options]
    page.select_option("#engine-catalog", "boot-repaired")
    page.locator("#engine").screenshot(path=str(shots / "recipe-engine-form.png"))
