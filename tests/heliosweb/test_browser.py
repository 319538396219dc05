"""A maintainer in Debian's Chromium: log in, start a pr22 job, watch it reach 100 % and the table
show the pull request's eight figures."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User

from heliosweb.jobs.models import BenchmarkJob

from .conftest import log_in_and_open, needs_chromium

EIGHT = ["3 / 62.10", "1 / 66.10", "3 / 62.10", "1 / 66.10", "6 / 232.10", "4 / 232.10", "9 / 238.10", "4 / 232.10"]

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]


def test_a_maintainer_starts_pr22_and_watches_it_finish_with_the_eight_figures(stack, page):
    group, _ = Group.objects.get_or_create(name="maintainers")
    group.permissions.add(Permission.objects.get(codename="run_jobs"))
    User.objects.create_user("browser-maint", password="pw-browser-123").groups.add(group)
    stack.start_web()

    log_in_and_open(page, f"{stack.base_url}/jobs/new", "browser-maint", "pw-browser-123")
    page.select_option("#id_kind", "pr22")
    page.click("#start-job")
    page.wait_for_url("**/jobs/*")

    page.wait_for_function("document.getElementById('job-progress').value === 100")
    page.wait_for_function("document.querySelectorAll('#pr22-table tbody tr').length === 4")
    page.wait_for_function("document.getElementById('job-status').textContent === 'done'")
    cells = page.eval_on_selector_all("#pr22-table tbody tr td:nth-child(4), #pr22-table tbody tr td:nth-child(5)",
                                      "tds => tds.map(td => td.textContent)")
    rows = page.eval_on_selector_all("#pr22-table tbody tr", "trs => trs.map(tr => [tr.children[3].textContent, tr.children[4].textContent])")
    assert [x for row in rows for x in row] == EIGHT, cells
    assert page.eval_on_selector("#chart", "el => el.querySelectorAll('.bars .point').length") == 8
    assert page.text_content("#job-percent") == "100%"

    # A reload gets every arm twice (stored result and replayed events): still one row per arm.
    stored_events = BenchmarkJob.objects.get().events.count()
    page.reload()
    page.wait_for_function(f"document.getElementById('event-count').textContent === '{stored_events}'"
                           " && !document.getElementById('result').hidden")
    rows = page.eval_on_selector_all("#pr22-table tbody tr", "trs => trs.map(tr => [tr.children[3].textContent, tr.children[4].textContent])")
    assert [x for row in rows for x in row] == EIGHT
    assert page.eval_on_selector("#chart", "el => el.querySelectorAll('.bars .point').length") == 8
