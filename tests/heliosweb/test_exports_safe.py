"""Exports are safe (issue 18, rows 8 and 9): no CSV cell a spreadsheet would run, only `csv` and
`json` served, and file names that never carry user text."""

from __future__ import annotations

import csv
import io
import json

import pytest

from heliosweb.audit.services import audit_append
from heliosweb.common.csv_cells import csv_cell
from heliosweb.figures.contract import JobData, KindViews
from heliosweb.figures.exports import table_csv

FORMULAS = ['=HYPERLINK("http://evil","x")', "+1+1", "-2+3", "@SUM(1)", "\tcmd", "\r=1", "=1|calc"]


@pytest.mark.parametrize("text", FORMULAS)
def test_a_text_a_spreadsheet_would_run_is_shown_as_text(text):
    assert csv_cell(text) == "'" + text


@pytest.mark.parametrize("value", ["cost", "a=b", " =x", "", "'=already", 3, -2.5, None, 0])
def test_other_cells_are_written_as_they_are(value):
    assert csv_cell(value) == value


def _export(client, path: str) -> tuple[object, str]:
    response = client.get(path)
    body = b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()
    return response, body


def test_usernames_tried_at_the_login_form_come_out_of_the_audit_csv_as_text(client, viewer):
    for name in ('=HYPERLINK("http://evil")', "+1+1", "@SUM(1)"):
        client.post("/accounts/login/", {"username": name, "password": "x"})
    audit_append(action="job_started", actor=viewer, object_type="job", object_id=1, reason="-1 then =2")
    client.force_login(viewer)
    response, text = _export(client, "/audit/export.csv")
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(text)))
    cells = [cell for row in rows for cell in row.values()]
    assert not [c for c in cells if c and c[0] in "=+-@\t\r"], "a formula cell is in the export"
    actors = [r["actor"] for r in rows if r["action"] == "login_failed"]
    assert actors == ['\'=HYPERLINK("http://evil")', "'+1+1", "'@SUM(1)"]
    assert [r["reason"] for r in rows if r["action"] == "job_started"] == ["'-1 then =2"]
    # The JSON export keeps the text exactly (JSON has no formulas).
    _, raw = _export(client, "/audit/export.json")
    assert [r["actor"] for r in json.loads(raw) if r["action"] == "login_failed"][0] == '=HYPERLINK("http://evil")'


@pytest.mark.parametrize(
    "path",
    [
        "/audit/export.html",
        "/audit/export.xml",
        "/audit/export.CSV",
        "/audit/export.csv%22%3B%20filename%3Devil.html",
        "/audit/export.csv%0D%0ASet-Cookie:%20x=1",
        "/audit/export.json%00",
        "/audit/export.csv%22",
        "/audit/export.",
        "/audit/export.csvx",
    ],
)
def test_only_csv_and_json_are_served(client, viewer, path):
    client.force_login(viewer)
    response = client.get(path)
    assert response.status_code == 404
    assert "Content-Disposition" not in response


@pytest.mark.parametrize(("fmt", "kind"), [("csv", "text/csv"), ("json", "application/json")])
def test_the_file_name_is_the_servers(client, viewer, fmt, kind):
    client.force_login(viewer)
    response = client.get(f"/audit/export.{fmt}?actor=%22%3Bfilename%3Devil.html")
    assert response.status_code == 200 and response["Content-Type"].startswith(kind)
    assert response["Content-Disposition"] == f'attachment; filename="helios-audit.{fmt}"'


def test_job_table_cells_are_neutralised_and_numbers_stay_numbers(db):
    rows = [{"label": "=cmd|' /C calc'!A0", "delta_ms": -1.5, "policy": "cost"}, {"label": "@x", "delta_ms": 2}]
    views = KindViews(figures=lambda job: [], tables=lambda job: {"points": rows})
    job = JobData(id=1, kind="sweep", status="done", params={}, result={})
    name, text = table_csv(job, views, None)
    assert name == "points"
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert [r["label"] for r in parsed] == ["'=cmd|' /C calc'!A0", "'@x"]
    assert [r["delta_ms"] for r in parsed] == ["-1.5", "2"]


def test_the_job_table_file_name_is_one_of_the_kinds_own(client, viewer):
    from .runs import store

    job = store("simulate")
    client.force_login(viewer)
    ok = client.get(f"/api/jobs/{job.pk}/table.csv?table=requests")
    assert ok["Content-Disposition"] == f'attachment; filename="job-{job.pk}-requests.csv"'
    forged = client.get(f'/api/jobs/{job.pk}/table.csv?table=requests".html')
    assert forged.status_code == 404 and "Content-Disposition" not in forged
