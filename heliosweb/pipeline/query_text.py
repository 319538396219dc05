"""Query strings hold only text every database stores: refused in one place, before any view.

A `%00` in a filter reached PostgreSQL, which refuses a NUL in a string: a 500, or a stream cut after
its headers (a lone surrogate cannot arrive this way: Django decodes with replacement). A parameter
holding one answers 400 naming it (`{error, field}` under /api/, plain text elsewhere). Bodies are
checked where they are read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils.decorators import sync_and_async_middleware

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


@sync_and_async_middleware
def refuse_unstorable_query(get_response: Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]]):
    if iscoroutinefunction(get_response):

        async def async_middleware(request: HttpRequest) -> HttpResponse:
            return query_refusal(request) or await get_response(request)

        return async_middleware

    def middleware(request: HttpRequest) -> HttpResponse:
        return query_refusal(request) or get_response(request)  # type: ignore[return-value]

    return middleware
