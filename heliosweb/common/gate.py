"""A middleware that answers some requests itself and passes the rest on, in sync and async chains
alike (no thread hop for the async views: the policy long-poll)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import sync_and_async_middleware

Handler = Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]]


def gate(check: Callable[[HttpRequest], HttpResponse | None]) -> Callable[[Handler], Handler]:
    """A middleware answering `check`'s answer, else the view's; `check` runs on the loop: no database."""

    @sync_and_async_middleware
    def middleware(get_response: Handler) -> Handler:
        if iscoroutinefunction(get_response):

            async def async_middleware(request: HttpRequest) -> HttpResponse:
                answer = check(request)
                return answer if answer is not None else await get_response(request)

            return async_middleware

        def sync_middleware(request: HttpRequest) -> HttpResponse:
            answer = check(request)
            return answer if answer is not None else get_response(request)  # type: ignore[return-value]

        return sync_middleware

    return middleware
