"""A job page under the site's own Content-Security-Policy (django-csp), in Debian's Chromium with
no bypass: its figures draw, Plotly's modebar camera downloads a PNG, and the browser reports no
policy violation and no console error. Plotly draws the PNG from a blob: image, which `img-src`
must allow. (The other browser tests bypass the policy: Playwright's
wait_for_function evaluates with eval, which the policy refuses.)"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from .conftest import log_in_and_open, needs_chromium
from .runs import store

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True), needs_chromium]

VIOLATIONS = """window.cspViolations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.cspViolations.push(e.violatedDirective + " " + e.blockedURI));"""


def test_a_figure_draws_and_downloads_as_png_under_the_sites_content_security_policy(stack, page):
    User.objects.create_user("csp-viewer", password="pw-csp-123")
    stack.start_web()
    job = store("pr22")
    strict = page.context.browser.new_page(accept_downloads=True)  # a context without bypass_csp
    strict.set_default_timeout(60_000)
    strict.add_init_script(VIOLATIONS)
    errors: list[str] = []
    strict.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    strict.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    policies: list[str] = []
    strict.on(
        "response",
        lambda r: (
            policies.append(r.headers.get("content-security-policy", "")) if r.url.endswith(f"/jobs/{job.pk}") else None
        ),
    )

    log_in_and_open(strict, f"{stack.base_url}/jobs/{job.pk}", "csp-viewer", "pw-csp-123")
    figure = strict.locator("#figures [data-figure-id=ttft]")
    figure.locator(".main-svg").first.wait_for()
    assert policies and "script-src 'self'" in policies[-1] and "unsafe-eval" not in policies[-1], policies
    assert strict.evaluate("document.querySelector('[data-figure-id=ttft]').data.length") == 2

    figure.hover()
    # No "Share chart" button: Plotly.js would post the figure to a Plotly server; the site is offline.
    assert figure.locator(".modebar-btn[data-title^='Share']").count() == 0
    with strict.expect_download() as download:
        figure.locator(
            ".modebar-btn[data-title='Download plot as a PNG'], .modebar-btn[data-title='Download plot as a png']"
        ).click()
    png = download.value
    assert png.suggested_filename == f"job-{job.pk}-ttft.png"
    with open(png.path(), "rb") as saved:
        assert saved.read(8) == b"\x89PNG\r\n\x1a\n"
    assert strict.evaluate("window.cspViolations") == []
    assert errors == [], errors
    strict.close()
