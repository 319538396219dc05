"""Pages and JSON answers gzipped for browsers that accept it: a compare page embeds 120 KB of
figures (20 KB gzipped), a large job's `/figures/` answer ~1 MB. Static files come compressed from
WhiteNoise. An answer with an ETag is left alone, so the strong ETags of the policy long-poll stay
strong. Django's GZipMiddleware pads against BREACH, and CSRF tokens are masked per response."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase
from django.middleware.gzip import GZipMiddleware

COMPRESSED_TYPES = ("text/html", "application/json")


class HtmlGZipMiddleware(GZipMiddleware):
    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if not response.get("Content-Type", "").startswith(COMPRESSED_TYPES) or response.has_header("ETag"):
            return response
        return super().process_response(request, response)
