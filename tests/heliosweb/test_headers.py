"""Response headers: a Content-Security-Policy that allows no inline script on every page, static
files with nosniff and cache headers (compressed and content-hashed once collected for production),
and the OpenAPI schema behind login like the rest of /api/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db


def test_every_page_has_a_policy_allowing_scripts_only_from_this_origin(client, maintainer, recipe, done_job):
    client.force_login(maintainer)
    for url in ("/", "/jobs/", "/jobs/new", f"/jobs/{done_job.pk}", "/recipes/tiny-cpu", "/decisions/", "/compare"):
        response = client.get(url)
        assert response.status_code == 200, url
        policy = dict(part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";"))
        assert policy["script-src"] == "'self'" and policy["frame-ancestors"] == "'none'", url
        assert response["X-Content-Type-Options"] == "nosniff"
    assert "Content-Security-Policy" in Client().get("/accounts/login/")


def test_pages_are_sent_gzipped_to_a_browser_and_api_answers_keep_their_strong_etag(client, maintainer, recipe):
    import gzip

    client.force_login(maintainer)
    page = client.get("/recipes/tiny-cpu", HTTP_ACCEPT_ENCODING="gzip")
    assert page["Content-Encoding"] == "gzip" and b"<html" in gzip.decompress(page.content)
    assert "Accept-Encoding" in page["Vary"]
    policy = client.get("/api/recipes/tiny-cpu/policy", HTTP_ACCEPT_ENCODING="gzip")
    assert policy.status_code == 200 and not policy.has_header("Content-Encoding")
    assert policy["ETag"].startswith('"'), policy["ETag"]  # strong, as engines send it back


def test_a_jobs_figures_are_sent_gzipped_to_a_browser_that_asks(client, maintainer, done_job):
    import gzip
    import json

    client.force_login(maintainer)
    plain = client.get(f"/api/jobs/{done_job.pk}/figures/")
    zipped = client.get(f"/api/jobs/{done_job.pk}/figures/", HTTP_ACCEPT_ENCODING="gzip")
    assert not plain.has_header("Content-Encoding") and zipped["Content-Encoding"] == "gzip"
    assert json.loads(gzip.decompress(zipped.content)) == json.loads(plain.content)


def test_no_template_holds_inline_script_or_event_handlers():
    for template in (ROOT / "templates").rglob("*.html"):
        text = template.read_text()
        inline = [s for s in re.findall(r"<script([^>]*)>(.*?)</script>", text, re.S) if s[1].strip()]
        assert not inline, template
        assert not re.search(r"\son[a-z]+\s*=", text), template


def test_static_files_are_served_with_nosniff_and_a_cache_header(client):
    response = client.get("/static/helios/live.js")
    assert response.status_code == 200
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Type"].startswith("text/javascript")
    assert "max-age" in response["Cache-Control"]


@pytest.mark.parametrize("debug", [False, True], ids=["production", "dev-up"])
def test_collected_static_files_are_hashed_compressed_and_cached_for_good(
    tmp_path, client, maintainer, done_job, debug
):
    """As production and `./dev up` (DEBUG on) serve them: every page names the hashed files,
    scripts deferred, and each is served gzipped with a cache header of at least a year."""
    from heliosweb.settings import STORAGES

    collected = {**STORAGES, "staticfiles": {"BACKEND": "heliosweb.pipeline.static_files.CollectedStaticStorage"}}
    with override_settings(
        STATIC_ROOT=tmp_path,
        STORAGES=collected,
        WHITENOISE_USE_FINDERS=False,
        WHITENOISE_AUTOREFRESH=False,
        DEBUG=debug,
    ):
        call_command("collectstatic", "--noinput", "-v", "0")
        client.force_login(maintainer)
        page = client.get(f"/jobs/{done_job.pk}").content.decode()
        scripts = re.findall(r"<script ([^>]*)>", page)
        assert scripts and all(s.startswith("defer src=") for s in scripts), scripts
        urls = re.findall(r'(?:src|href)="(/static/[^"]+)"', page)
        assert any(re.search(r"/static/vendor/plotly/plotly-basic\.min\.[0-9a-f]{12}\.js$", u) for u in urls), urls
        for url in urls:
            assert re.search(r"\.[0-9a-f]{12}\.(js|css)$", url), url
            response = Client().get(url, HTTP_ACCEPT_ENCODING="gzip")
            assert response.status_code == 200 and response["Content-Encoding"] == "gzip", url
            max_age = int(re.search(r"max-age=(\d+)", response["Cache-Control"])[1])
            assert max_age >= 365 * 24 * 3600 and "immutable" in response["Cache-Control"], url
            assert response["X-Content-Type-Options"] == "nosniff"


def test_the_api_schema_needs_credentials(client, maintainer):
    response = Client().get("/api/schema/")
    assert response.status_code in (401, 403)
    assert set(response.json()) == {"error", "field"}
    client.force_login(maintainer)
    assert client.get("/api/schema/?format=json").status_code == 200
