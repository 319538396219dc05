"""Query strings hold only text every database stores: refused in one place, before any view.

A `%00` in a filter reached PostgreSQL, which refuses a NUL in a string: a 500, or a stream cut after
its headers (a lone surrogate cannot arrive this way: Django decodes with replacement). A parameter
holding one answers 400 naming it (`{error, field}` under /api/, plain text elsewhere). Bodies are
checked where they are read.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

from heliosweb.common.gate import gate
from scheduler_core.validation import text_problem


def query_refusal(request: HttpRequest) -> HttpResponse | None:
    """The 400 for the first query parameter holding text no database stores, or None."""
    for name, values in request.GET.lists():
        for text in (name, *values):
            problem = text_problem(text)
            if problem:
                field = name.encode("unicode_escape").decode()
                if request.path.startswith("/api/"):
                    return JsonResponse({"error": f"{field}: {problem}", "field": field}, status=400)
                return HttpResponseBadRequest(f"{field}: {problem}", content_type="text/plain; charset=utf-8")
    return None


refuse_unstorable_query = gate(query_refusal)  # in MIDDLEWARE before any view
