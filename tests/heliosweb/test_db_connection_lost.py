"""Row 23 of issue 18: a request whose database connection is cut mid-request (PostgreSQL's
`pg_terminate_backend` from another session, as an operator or a failover does) never answers
500: a read is retried once on a fresh connection, a write answers 503 with Retry-After and
stores nothing. Real PostgreSQL only: SQLite has no connection to cut."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from heliosweb.jobs import selectors
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.jobs.services import submission

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL=postgres://...): SQLite has no connection to cut")


def cut_own_connection() -> None:
    """Terminate this thread's database session from another one, as `pg_terminate_backend` does."""
    import psycopg

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    settings = connection.settings_dict
    with psycopg.connect(
        dbname=settings["NAME"], user=settings["USER"], host=settings["HOST"], port=settings["PORT"] or 5432,
        autocommit=True,
    ) as other:  # fmt: skip
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def cut_before(monkeypatch: pytest.MonkeyPatch, module, name: str, times: int) -> list[int]:
    """The next `times` calls of `module.name` first have their connection cut."""
    calls: list[int] = []
    original = getattr(module, name)

    def wrapped(*args, **kwargs):
        calls.append(1)
        if len(calls) <= times:
            cut_own_connection()
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return calls


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_read_whose_connection_was_cut_is_retried_on_a_fresh_one(postgres, maintainer, monkeypatch):
    job = submission.job_create(kind="pulse", params={"count": 1, "rate": 10.0}, user=maintainer)
    client = logged_in(maintainer)
    calls = cut_before(monkeypatch, selectors, "job_get", times=1)
    response = client.get(f"/api/jobs/{job.pk}/")
    assert response.status_code == 200, response.content
    assert response.json()["id"] == job.pk and len(calls) == 2


def test_a_read_cut_twice_answers_503_with_retry_after(postgres, maintainer, monkeypatch):
    job = submission.job_create(kind="pulse", params={"count": 1, "rate": 10.0}, user=maintainer)
    client = logged_in(maintainer)
    cut_before(monkeypatch, selectors, "job_get", times=2)
    response = client.get(f"/api/jobs/{job.pk}/")
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json()["field"] == "database"
    page = client.get(f"/jobs/{job.pk}")
    assert page.status_code == 200  # the next request finds the database again


def test_a_write_whose_connection_was_cut_answers_503_and_stores_nothing(postgres, maintainer, monkeypatch):
    client = logged_in(maintainer)
    cut_before(monkeypatch, submission, "_check_queue_room", times=1)
    before = BenchmarkJob.objects.count()
    response = client.post(
        "/api/jobs/", {"kind": "pulse", "params": {"count": 1, "rate": 10.0}}, content_type="application/json"
    )
    assert response.status_code == 503, response.content
    assert int(response["Retry-After"]) > 0 and response.json()["field"] == "database"
    assert BenchmarkJob.objects.count() == before
