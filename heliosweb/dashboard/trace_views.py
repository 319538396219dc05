"""The traces page: every stored trace with its summary and pictures, and an upload form."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from heliosweb.common.errors import http_status
from heliosweb.common.permissions import RUN_JOBS
from heliosweb.figures.contract import embedded
from heliosweb.figures.traces import trace_figures
from heliosweb.traces import selectors, services
from scheduler_core.errors import InvalidInput


@login_required
def trace_list(request: HttpRequest) -> HttpResponse:
    """Anyone logged in reads; uploading needs `jobs.run_jobs`, as uploading a boot does."""
    errors: dict[str, str] = {}
    status = 200
    if request.method == "POST":
        if not request.user.has_perm(RUN_JOBS):
            raise PermissionDenied(f"uploading a trace needs the maintainer permission ({RUN_JOBS})")
        declared = request.META.get("CONTENT_LENGTH") or ""
        try:
            services.check_size(int(declared) if declared.isdigit() else None)  # before the body is read
            upload = request.FILES.get("file")
            if upload is None:
                raise InvalidInput("file", "choose a trace file (Azure CSV or JSON Lines)")
            trace, _ = services.trace_upload(user=request.user, name=request.POST.get("name", ""), content=upload)
        except InvalidInput as exc:
            errors[exc.field] = exc.message
            status = http_status(exc)
        else:
            return redirect(f"/traces#trace-{trace.name}")
    traces = []
    for t in selectors.trace_list()[:50]:
        figures_json, slots = embedded(trace_figures(t.summary, f"trace-{t.pk}"))
        traces.append({"trace": t, "figures_json": figures_json, "slots": slots})
    return render(
        request,
        "traces/list.html",
        {
            "traces": traces,
            "errors": errors,
            "name": request.POST.get("name", ""),
            "max_bytes": services.MAX_TRACE_BYTES,
        },
        status=status,
    )
