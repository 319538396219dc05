"""Traces over the API: upload one (a multipart `file` with a `name`, or the raw bytes with
`?name=`), list them, read one's summary. Bounded by size before a byte is parsed."""

from __future__ import annotations

from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from heliosweb.common.api import ERROR, schema_field
from heliosweb.common.permissions import CanRunJobs
from scheduler_core.errors import InvalidInput
from scheduler_core.traffic import TraceError

from . import selectors, services
from .services import MAX_TRACE_BYTES, NAME

TRACE = selectors.TRACE.schema()


class RawTraceParser(BaseParser):
    """Any other body is the trace's bytes: left unread here, so the view reads it with its bound."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> dict[str, Any]:
        return {}


def _text_part(value: Any) -> SimpleUploadedFile | None:
    return SimpleUploadedFile("file", value.encode()) if isinstance(value, str) and value else None


class TraceListView(APIView):
    permission_classes = [IsAuthenticated, CanRunJobs]
    parser_classes = [MultiPartParser, RawTraceParser]

    @extend_schema(responses={200: selectors.TRACE.schema("TraceListed", many=True)})
    def get(self, request: Request) -> Response:
        return Response([selectors.trace_as_api(t) for t in selectors.trace_list()])

    @extend_schema(
        parameters=[
            OpenApiParameter("name", str, pattern=f"^{NAME.pattern}$", description="the trace's name, with a raw body")
        ],
        request={
            "multipart/form-data": inline_serializer(
                "TraceUpload",
                {
                    "file": schema_field({"type": "string", "format": "binary"}, help_text="the trace file"),
                    "name": serializers.RegexField(f"^{NAME.pattern}$"),
                },
            ),
            # The raw file, whatever its type says (text/csv, application/x-ndjson, ...): declared as
            # bytes, the one raw type generated clients (openapi-python-client) know.
            "application/octet-stream": bytes,
        },
        responses={200: TRACE, 201: TRACE, 400: ERROR, 403: ERROR, 409: ERROR, 413: ERROR},
        description=f"At most {MAX_TRACE_BYTES:,} bytes: multipart (`file`, `name`) or the raw file with "
        "`?name=` under any content type (text/csv, application/x-ndjson). The same bytes again answer the "
        "stored trace (200).",
    )
    def post(self, request: Request) -> Response:
        declared = request.META.get("CONTENT_LENGTH")
        services.check_size(int(declared) if declared and declared.isdigit() else None)
        multipart = (request.content_type or "").startswith("multipart/")
        if multipart:
            # a `file` part without a filename is a form field: its text is the trace
            upload = request.FILES.get("file") or _text_part(request.data.get("file"))
            if upload is None:
                raise InvalidInput("file", "is required: the trace file (Azure CSV or JSON Lines)")
            services.check_size(upload.size)
            name, content = request.data.get("name") or request.query_params.get("name", ""), upload
        else:
            content = request._request.read(MAX_TRACE_BYTES + 1)
            services.check_size(len(content))
            name = request.query_params.get("name", "")
        try:
            trace, created = services.trace_upload(user=request.user, name=name, content=content)
        except TraceError as exc:
            return Response({**exc.as_dict(), "line": exc.line, "column": exc.column}, status=400)
        return Response(
            selectors.trace_as_api(trace), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class TraceDetailView(APIView):
    permission_classes = [IsAuthenticated, CanRunJobs]

    @extend_schema(responses={200: TRACE, 404: ERROR})
    def get(self, request: Request, name: str) -> Response:
        return Response(selectors.trace_as_api(selectors.trace_get(name=name)))
