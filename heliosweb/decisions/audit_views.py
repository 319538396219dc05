"""The audit page (filters, pages of 50) and its exports (CSV and JSON of the filtered rows). It
lives here, above recipes, because its badge is the full check: the chain and every recipe's policy."""

from __future__ import annotations

import csv
import json
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import render

from heliosweb.audit.models import AuditEvent
from heliosweb.audit.selectors import EVENT, FILTERS, audit_choices, audit_events, change_text, event_as_api
from heliosweb.common.csv_cells import csv_row
from scheduler_core.errors import InvalidInput

from .selectors import audit_verify

PAGE_SIZE = 50
EXPORT_NAMES = {"csv": "helios-audit.csv", "json": "helios-audit.json"}  # every format served, by name


class ExportFormat:
    """The `<export_format:fmt>` URL part: `csv` or `json` and nothing else (any other text, a quote,
    CR/LF or NUL included, matches no route: 404), so neither the format nor the file name carries
    user text."""

    regex = "|".join(EXPORT_NAMES)

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


# Every field of an event as the API and the JSON export show it (`EVENT`), its time second.
CSV_COLUMNS = ("seq", "created_at", *(k for k in EVENT.keys if k not in ("seq", "created_at")))


def filters_of(request: HttpRequest) -> dict[str, str]:
    return {name: request.GET.get(name, "").strip() for name in FILTERS}


def _filtered(request: HttpRequest) -> tuple[dict[str, str], QuerySet[AuditEvent] | None, str]:
    filters = filters_of(request)
    try:
        return filters, audit_events(**filters), ""
    except InvalidInput as exc:
        return filters, None, str(exc)


@login_required
def audit_page(request: HttpRequest) -> HttpResponse:
    filters, events, error = _filtered(request)
    page = Paginator(events if events is not None else AuditEvent.objects.none(), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    for event in page:
        event.change = change_text(event.before, event.after)
    query = urlencode({k: v for k, v in filters.items() if v})
    context = {
        "page": page,
        "filters": filters,
        "choices": audit_choices(),
        "chain": audit_verify(),
        "error": error,
        "query": query,
    }
    return render(request, "audit/list.html", context, status=400 if error else 200)


@login_required
def audit_export(request: HttpRequest, fmt: str) -> HttpResponseBase:
    """Every filtered row, oldest first, streamed (an export of a year's trail stays small in memory).
    `fmt` is `csv` or `json` (the URL converter admits nothing else); the file name is the server's."""
    _, events, error = _filtered(request)
    if events is None:
        return HttpResponse(json.dumps({"error": error}), status=400, content_type="application/json")
    rows = (event_as_api(e) for e in events.iterator(chunk_size=500))
    if fmt == "json":
        response = StreamingHttpResponse(_json_lines(rows), content_type="application/json")
    else:
        response = StreamingHttpResponse(_csv_lines(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{EXPORT_NAMES[fmt]}"'
    return response


def _json_lines(rows: Any) -> Any:
    yield "["
    for i, row in enumerate(rows):
        yield ("," if i else "") + json.dumps(row, ensure_ascii=False)
    yield "]\n"


class _Echo:
    def write(self, value: str) -> str:
        return value


def _csv_lines(rows: Any) -> Any:
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    for row in rows:
        cells = {**row, "before": json.dumps(row["before"]), "after": json.dumps(row["after"])}
        yield writer.writerow(csv_row(cells[c] for c in CSV_COLUMNS))
