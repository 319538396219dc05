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


def test_collected_static_files_are_hashed_compressed_and_cached_for_good(tmp_path):
    production_storage = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    with override_settings(STATIC_ROOT=tmp_path, STORAGES=production_storage, WHITENOISE_USE_FINDERS=False):
        call_command("collectstatic", "--noinput", "-v", "0")
        from django.contrib.staticfiles.storage import staticfiles_storage

        url = staticfiles_storage.url("helios/live.js")
        assert re.search(r"/static/helios/live\.[0-9a-f]{12}\.js$", url)
        response = Client().get(url, HTTP_ACCEPT_ENCODING="gzip")
        assert response.status_code == 200 and response["Content-Encoding"] == "gzip"
        assert "immutable" in response["Cache-Control"] and response["X-Content-Type-Options"] == "nosniff"


def test_the_api_schema_needs_credentials(client, maintainer):
    response = Client().get("/api/schema/")
    assert response.status_code in (401, 403)
    assert set(response.json()) == {"error", "field"}
    client.force_login(maintainer)
    assert client.get("/api/schema/?format=json").status_code == 200
