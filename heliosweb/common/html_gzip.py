"""Pages (HTML) sent gzipped to browsers that accept it: a compare or explain page embeds its
figures' JSON (120 KB for five overlaid figures, 20 KB gzipped). Static files are compressed ahead
by WhiteNoise; API answers are left alone, so their ETags stay the strong ones engines send back
in If-None-Match (GZipMiddleware weakens an ETag when it compresses). Django's GZipMiddleware adds
random bytes to each compressed page against BREACH, and CSRF tokens are masked per response."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase
from django.middleware.gzip import GZipMiddleware


class HtmlGZipMiddleware(GZipMiddleware):
    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if not response.get("Content-Type", "").startswith("text/html"):
            return response
        return super().process_response(request, response)
