"""Pages (HTML) and JSON answers sent gzipped to browsers that accept it: a compare or explain page
embeds its figures' JSON (120 KB for five overlaid figures, 20 KB gzipped), and a 19,000-request
job's `/figures/` answer is about 1 MB of JSON that gzip brings to a fifth. Static files are
compressed ahead by WhiteNoise. An answer carrying an ETag is left alone, so the strong ETags engines
send back in If-None-Match (the policy long-poll) stay strong (GZipMiddleware weakens an ETag when it
compresses). Django's GZipMiddleware adds random bytes to each compressed answer against BREACH, and
CSRF tokens are masked per response."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase
from django.middleware.gzip import GZipMiddleware

COMPRESSED_TYPES = ("text/html", "application/json")


class HtmlGZipMiddleware(GZipMiddleware):
    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if not response.get("Content-Type", "").startswith(COMPRESSED_TYPES) or response.has_header("ETag"):
            return response
        return super().process_response(request, response)
