"""The library middleware of `settings.MIDDLEWARE`, as an async view's chain runs them: on the loop.

In Django's async chain (the policy long-poll) a `MiddlewareMixin` calls each hook through
`sync_to_async`: one policy change answering 1,000 long-polling engines queued 8,000 thread hops,
p95 2.5-5.6 s (docs/bench/2026-12-02-long-poll-on-the-loop.md). These subclasses call the hooks on
the loop, as none does I/O there unless a hook below says so (a session to save, messages to store,
a CSRF check reading the session or a body: in the thread). WhiteNoise gains an async path too.
`settings.MIDDLEWARE` keeps the libraries' names (Django's deploy checks look for them);
`server.handler` swaps in the subclasses of `ON_LOOP` for the async chain only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from csp import middleware as csp
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.http import HttpRequest, HttpResponseBase
from django.middleware import clickjacking, common, csrf, security
from django.utils.deprecation import MiddlewareMixin
from whitenoise.middleware import WhiteNoiseMiddleware

SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")


async def _call(on_loop: bool, method: Callable[..., Any], *args: Any) -> Any:
    return method(*args) if on_loop else await sync_to_async(method, thread_sensitive=True)(*args)


class OnLoop(MiddlewareMixin):
    """`MiddlewareMixin`'s async mode without thread hops, for hooks that do no I/O unless they say so."""

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        super().__init__(get_response)
        if iscoroutinefunction(get_response) and hasattr(self, "process_view"):
            # Django takes `process_view` from the instance once built, and awaits it as is when async.
            setattr(self, "process_view", self._process_view_async)  # noqa: B010  (an instance's, not the class's)

    def request_on_loop(self, request: HttpRequest) -> bool:
        return True

    def view_on_loop(self, request: HttpRequest) -> bool:
        return True

    def response_on_loop(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return True

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = None
        if hasattr(self, "process_request"):
            response = await _call(self.request_on_loop(request), self.process_request, request)
        response = response or await cast(Awaitable[HttpResponseBase], self.get_response(request))
        if hasattr(self, "process_response"):
            on_loop = self.response_on_loop(request, response)
            response = await _call(on_loop, self.process_response, request, response)
        return response

    async def _process_view_async(
        self, request: HttpRequest, view: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> HttpResponseBase | None:
        process_view = getattr(type(self), "process_view")  # noqa: B009  (the class's, not the instance's)
        return await _call(self.view_on_loop(request), process_view, self, request, view, args, kwargs)


class SecurityMiddleware(OnLoop, security.SecurityMiddleware):
    """Headers and the HTTPS redirect: no I/O."""


class CSPMiddleware(OnLoop, csp.CSPMiddleware):
    """A nonce and a header: no I/O."""


class SessionMiddleware(OnLoop, sessions.SessionMiddleware):
    """The session is read lazily (by whoever reads it, in a thread); only saving it writes."""

    def response_on_loop(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        session = getattr(request, "session", None)
        return session is None or not (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class CommonMiddleware(OnLoop, common.CommonMiddleware):
    """User agents, slashes and Content-Length: no I/O."""


class CsrfViewMiddleware(OnLoop, csrf.CsrfViewMiddleware):
    """The token from a cookie and a header is no I/O; the session (CSRF_USE_SESSIONS) is, and an
    unsafe method's check may read its body and answer with the failure view: in the thread."""

    def request_on_loop(self, request: HttpRequest) -> bool:
        return not settings.CSRF_USE_SESSIONS

    def view_on_loop(self, request: HttpRequest) -> bool:
        return request.method in SAFE_METHODS and not settings.CSRF_USE_SESSIONS


class AuthenticationMiddleware(OnLoop, auth.AuthenticationMiddleware):
    """`request.user` is lazy: the user is read by whoever reads it (in a thread, or `auser()`)."""


class MessageMiddleware(OnLoop, messages.MessageMiddleware):
    """Storing messages may read and write the session: only when some were read or added."""

    def response_on_loop(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is None or not (storage.used or storage.added_new)


class XFrameOptionsMiddleware(OnLoop, clickjacking.XFrameOptionsMiddleware):
    """One header: no I/O."""


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise, async-capable: a path that is no static file goes on without a thread; a file is
    served (and, with autorefresh, looked up on disk) in one."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(get_response, *args, **kwargs)
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request: HttpRequest) -> Any:
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve)(static_file, request)
        response: Awaitable[Any] = self.get_response(request)
        return await response


ON_LOOP = {
    f"{base.__module__}.{base.__qualname__}": f"{__name__}.{sub.__qualname__}"
    for sub in (
        SecurityMiddleware,
        CSPMiddleware,
        SessionMiddleware,
        CommonMiddleware,
        CsrfViewMiddleware,
        AuthenticationMiddleware,
        MessageMiddleware,
        XFrameOptionsMiddleware,
        StaticFilesMiddleware,
    )
    for base in sub.__bases__[-1:]
}
"""The path of each library class -> the path of its subclass here (what the async chain loads)."""
