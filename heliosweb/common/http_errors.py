"""Django's own error answers (`handler400/404/500`, the CSRF failure view, unknown /api/ paths):
`{error, field}` JSON under /api/, the usual pages elsewhere. DRF views answer through
`common.api.exception_handler`; these cover the rest (an unknown /api/ path, a body too large for
Django's form parser, a crash in a plain view), in production too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.views import csrf, defaults
from django.views.decorators.csrf import csrf_exempt

from .errors import NotFound, internal_error
from .gate import gate

T = TypeVar("T")
JSON_ONLY = "the API reads JSON bodies only (Content-Type: application/json)"


def json_error(status: int, field: str, message: str) -> JsonResponse:
    """The API's `{error, field}` answer, for code that answers outside DRF's exception handler."""
    return JsonResponse({"error": message, "field": field}, status=status)


def _api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


@csrf_exempt  # a token POST to a path no route names is a 404, not a CSRF refusal: nothing here acts
def api_not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    """Every /api/ path no route names, in development and production alike."""
    return json_error(404, "path", f"no API endpoint {request.path}")


def _host_refused(request: HttpRequest) -> JsonResponse | None:
    """A Host that ALLOWED_HOSTS refuses, under /api/: the JSON 400 `field: "host"` in development
    too (with DEBUG on, Django answers it with its HTML debug page before `handler400` is asked)."""
    if _api(request):
        try:
            request.get_host()
        except DisallowedHost as exc:
            return json_error(400, "host", str(exc))
    return None


api_host_check = gate(_host_refused)  # in MIDDLEWARE right after SecurityMiddleware


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if not _api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return json_error(413, "body", f"body: is over {limit:,} bytes")
    if isinstance(exception, DisallowedHost):
        return json_error(400, "host", str(exception))
    if isinstance(exception, MultiPartParserError):  # read by Django before any API view (the CSRF check)
        return json_error(400, "content_type", f"{JSON_ONLY}; this multipart body is unreadable ({exception})")
    return json_error(400, "request", "bad request")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """`CSRF_FAILURE_VIEW`: a browser-session post without its CSRF token. API views check it
    themselves (DRF's answer goes through `common.api`); this covers the rest of /api/."""
    if not _api(request):
        return csrf.csrf_failure(request, reason)
    return json_error(403, "authorization", f"CSRF Failed: {reason}")


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return api_not_found(request) if _api(request) else defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if not _api(request):
        return defaults.server_error(request)
    return JsonResponse(internal_error(), status=500)


def found_or_404(get: Callable[..., T], **key: object) -> T:
    """`get(**key)` for a page: its NotFound as the 404 page, naming what was not found."""
    try:
        return get(**key)
    except NotFound as exc:
        raise Http404(exc.message) from None
