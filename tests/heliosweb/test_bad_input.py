"""Every bad input the careless or hostile user sent (issue 9, faults 10-13), over the API, the
forms and the websocket: a 4xx that names what is wrong ({error, field} JSON on the API), nothing
stored, nothing queued, and the socket still open."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from rest_framework.test import APIClient

from heliosweb.catalogs.models import Boot
from heliosweb.decisions.models import PolicyDecision
from heliosweb.jobs.models import BenchmarkJob

from .conftest import ORIGIN, grant

HUGE_INT = "9" * 401
DEEP_ARRAYS = "[" * 100_000 + "]" * 100_000
DEEP_OBJECTS = '{"a":' * 50_000 + "1" + "}" * 50_000
NESTED_33 = '{"a":' * 33 + "1" + "}" * 33
GRAPH = '{"prefill": 64, "decode": 0, "ms": 1}'


def _boot(graphs: str = GRAPH, extra: str = "") -> str:
    return '{"catalog": [' + graphs + "]" + extra + "}"


# (method, path, raw JSON body or None, status, field). Bodies are raw text: most of them cannot
# be written as Python values at all (1e400, 401-digit numbers, 100,000 brackets).
API_CASES = [
    ("post", "/api/jobs/", '{"kind": "pr22", "params": {"fixed_ms": ' + HUGE_INT + "}}", 400, "params.fixed_ms"),
    ("post", "/api/jobs/", '{"kind": "pr22", "params": {"drift_factor": 1e400}}', 400, "params.drift_factor"),
    ("post", "/api/jobs/", '{"kind": "pr22", "params": {"drift_factor": NaN}}', 400, "params.drift_factor"),
    ("post", "/api/jobs/", '{"kind": "sweep", "params": {"boot_catalog": {"boot": ' + str(10**30) + "}}}", 400, None),
    ("post", "/api/jobs/", '{"kind": "sweep", "params": {"boot_catalog": {"boot": 9223372036854775807}}}', 400, None),
    ("post", "/api/jobs/", DEEP_ARRAYS, 400, "body"),
    ("post", "/api/jobs/", DEEP_OBJECTS, 400, "body"),
    ("post", "/api/jobs/", '{"kind": "pr22", "params": ' + NESTED_33 + "}", 400, "body"),
    # fault 10: a boot of 1-token graphs makes one launch per token: sized by that boot, refused
    (
        "post",
        "/api/jobs/",
        '{"kind": "sweep", "params": {"boot_catalog": [{"prefill": 1, "decode": 0, "ms": 0.01}],'
        ' "count": 20000, "prompt_max": 1048576}}',
        400,
        "params.prompt_min",
    ),
    ("post", "/api/recipes/tiny-cpu/boots/", _boot('{"prefill": 64, "decode": 0, "ms": ' + HUGE_INT + "}"), 400, None),
    (
        "post",
        "/api/recipes/tiny-cpu/boots/",
        _boot('{"prefill": 9223372036854775808, "decode": 0, "ms": 1}'),
        400,
        None,
    ),
    (
        "post",
        "/api/recipes/tiny-cpu/boots/",
        _boot('{"prefill": 9223372036854775807, "decode": 0, "ms": 1}'),
        400,
        None,
    ),
    ("post", "/api/recipes/tiny-cpu/boots/", _boot('{"prefill": 64, "decode": 0, "ms": 1e308}'), 400, None),
    (
        "post",
        "/api/recipes/tiny-cpu/boots/",
        _boot(",".join(f'{{"prefill": {p}, "decode": 0, "ms": 1}}' for p in range(1, 5001))),
        400,
        "catalog",
    ),
    (
        "post",
        "/api/recipes/tiny-cpu/boots/",
        _boot(extra=', "provenance": {"log": "' + "x" * 1_000_000 + '"}'),
        400,
        None,
    ),
    ("post", "/api/recipes/tiny-cpu/boots/", _boot(extra=', "provenance": ' + DEEP_OBJECTS), 400, "body"),
    ("post", "/api/recipes/tiny-cpu/boots/", _boot(extra=', "surprise": 1'), 400, "surprise"),
    (
        "post",
        "/api/decisions/",
        '{"recipe": "tiny-cpu", "policy": "rule", "rationale": "r", "evidence": [1e400]}',
        400,
        "evidence[0]",
    ),
    ("get", "/api/jobs/99999999999999999999/", None, 404, None),
    ("get", "/api/decisions/99999999999999999999/", None, 404, None),
    ("get", "/api/jobs/?limit=" + HUGE_INT, None, 200, None),  # clamped, as documented
    ("get", "/api/jobs/1/events/?after=99999999999999999999", None, 400, "after"),
    ("get", "/api/no-such-thing/", None, 404, "path"),
]


@pytest.fixture
def api(maintainer) -> APIClient:
    user = grant(maintainer, "propose_decision")
    client = APIClient()
    client.force_authenticate(user)
    return client


def _stored() -> tuple[int, int, int]:
    return BenchmarkJob.objects.count(), Boot.objects.count(), PolicyDecision.objects.count()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "method, path, body, status, field", API_CASES, ids=[f"{c[1]} {i}" for i, c in enumerate(API_CASES)]
)
def test_the_api_answers_bad_input_with_json_naming_the_field(
    api, recipe, done_job, queued, method, path, body, status, field
):
    before = _stored()
    kwargs = {"data": body, "content_type": "application/json"} if body is not None else {}
    response = getattr(api, method)(path.replace("/1/", f"/{done_job.pk}/"), **kwargs)
    assert response.status_code == status, response.content[:300]
    if status >= 400:
        answer = response.json()
        assert set(answer) == {"error", "field"} and answer["error"]
        if field is not None:
            assert answer["field"] == field, answer
    assert _stored() == before and queued == []


@pytest.mark.django_db
def test_an_oversized_or_non_json_body_is_refused_in_json(api, recipe, settings, queued):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    big = api.post("/api/jobs/", data='{"kind": "pr22", "pad": "' + "x" * 2000 + '"}', content_type="application/json")
    assert big.status_code == 413 and big.json()["field"] == "body"
    # The API reads JSON only: a form post is refused naming the content type; an empty body of
    # any type is an empty object, refused naming the first field it lacks.
    form = api.post(
        "/api/jobs/",
        data="--x\r\nContent-Disposition: form-data; name=kind\r\n\r\npr22\r\n--x--\r\n",
        content_type="multipart/form-data; boundary=x",
    )
    assert form.status_code == 415 and form.json()["field"] == "content_type"
    assert "application/json" in form.json()["error"] and "multipart/form-data" in form.json()["error"]
    for content_type in ("multipart/form-data; boundary=x", "multipart/form-data", "application/json"):
        empty = api.post("/api/jobs/", data="", content_type=content_type)
        assert empty.status_code == 400 and empty.json()["field"] == "kind", content_type
    assert BenchmarkJob.objects.count() == 0 and queued == []


EMPTY_MULTIPART = [
    ("multipart/form-data; boundary=x", ""),  # no body at all: read as an empty object
    ("multipart/form-data; boundary=x", "--x--\r\n"),  # a multipart body with no parts
    ("multipart/form-data", "--x--\r\n"),  # and without a boundary
]


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/jobs/", "/api/recipes/tiny-cpu/boots/", "/api/no-such-endpoint/"])
@pytest.mark.parametrize("content_type, body", EMPTY_MULTIPART)
def test_an_empty_multipart_body_answers_json_from_a_browser_session_too(
    maintainer, recipe, queued, path, content_type, body
):
    """Signed in with a session, the CSRF check reads a form body before any API view: a body it
    cannot parse, or a missing token, must still answer `{error, field}`, never an empty 400."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(maintainer)
    no_token = browser.post(path, data=body, content_type=content_type)
    if path == "/api/no-such-endpoint/":  # nothing there acts, so no CSRF check: 404 whatever is sent
        assert (no_token.status_code, no_token.json()["field"]) == (404, "path")
    else:
        assert no_token.status_code == 403 and no_token.json()["field"] == "authorization"
    browser.get("/jobs/")
    token = browser.cookies["csrftoken"].value
    response = browser.post(path, data=body, content_type=content_type, HTTP_X_CSRFTOKEN=token)
    answer = response.json()
    assert set(answer) == {"error", "field"} and answer["error"]
    if path == "/api/no-such-endpoint/":
        assert (response.status_code, answer["field"]) == (404, "path")  # its body is never read
    elif body:
        assert response.status_code == 415 and answer["field"] == "content_type"  # not JSON: refused as such
    else:
        assert response.status_code == 400 and answer["field"] in {"kind", "catalog"}  # empty: the first field missing
    assert BenchmarkJob.objects.count() == 0 and queued == []


@pytest.mark.django_db
def test_an_unexpected_error_under_the_api_is_a_json_500(api, monkeypatch, settings):
    from heliosweb.jobs import api as jobs_api

    def crash(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(jobs_api.selectors, "job_list", crash)
    settings.DEBUG = False
    response = api.get("/api/jobs/")
    assert response.status_code == 500 and response.json() == {
        "error": "internal error (logged on the server)",
        "field": "server",
    }
    # Django's own handlers, outside the API views, answer JSON under /api/ too.
    from heliosweb.common import http_errors

    request = Client().get("/api/jobs/").wsgi_request
    assert json.loads(http_errors.server_error(request).content)["field"] == "server"


FORM_CASES = [
    ("/jobs/new", {"kind": "pr22", "pr22.fixed_ms": HUGE_INT}, "pr22.fixed_ms"),
    ("/jobs/new", {"kind": "pr22", "pr22.drift_factor": "1e400"}, "pr22.drift_factor"),
    ("/jobs/new", {"kind": "sweep", "sweep.boot_catalog": DEEP_ARRAYS}, "sweep.boot_catalog"),
    (
        "/jobs/new",
        {"kind": "sweep", "sweep.boot_catalog": '[{"prefill": 64, "decode": 0, "ms": 1e400}]'},
        "sweep.boot_catalog",
    ),
    ("/jobs/new", {"kind": "sweep", "sweep.boot_catalog.boots": str(10**30)}, "sweep.boot_catalog"),
    ("/decisions/new", {"recipe": "tiny-cpu", "policy": "rule", "rationale": "r", "evidence": str(10**30)}, "evidence"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("path, form, field", FORM_CASES)
def test_the_forms_show_the_field_error_and_store_nothing(maintainer, recipe, queued, path, form, field):
    client = Client()
    client.force_login(grant(maintainer, "propose_decision"))
    response = client.post(path, form)
    assert response.status_code == 400
    assert f'data-field="{field}' in response.content.decode() or f"{field}:" in response.content.decode()
    assert _stored() == (0, 0, 0) and queued == []


@pytest.mark.django_db
def test_the_compare_page_and_a_huge_job_id_page_refuse_without_a_500(maintainer):
    client = Client()
    client.force_login(maintainer)
    assert client.get("/compare?ids=1,99999999999999999999").status_code == 400
    assert client.get("/jobs/99999999999999999999").status_code == 404


WS_CASES = [
    (DEEP_ARRAYS, "message"),
    (DEEP_OBJECTS, "message"),
    ('{"type": "resume", "after": ' + HUGE_INT + "}", "after"),
    ('{"type": "resume", "after": 1e400}', "after"),
    ('{"type": "resume", "after": 99999999999999999999}', "after"),
    ("x" * 5000, "message"),
]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_bad_websocket_messages_get_an_error_and_the_socket_stays_open(maintainer):
    from channels.testing import WebsocketCommunicator

    from heliosweb.asgi import application
    from heliosweb.jobs.services.submission import job_create

    from .test_consumers import _session_cookie

    job = await database_sync_to_async(job_create)(kind="pr22", user=maintainer)
    cookie = await database_sync_to_async(_session_cookie)(maintainer)
    communicator = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=[cookie, ORIGIN])
    connected, _ = await communicator.connect()
    assert connected
    for text, field in WS_CASES:
        await communicator.send_to(text_data=text)
        answer = json.loads(await communicator.receive_from(timeout=5))
        assert answer["type"] == "error" and answer["field"] == field, (text[:40], answer)
    await communicator.send_to(text_data='{"type": "ping"}')
    assert json.loads(await communicator.receive_from(timeout=5)) == {"type": "pong"}
    await communicator.disconnect()
