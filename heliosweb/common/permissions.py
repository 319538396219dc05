"""API permissions shared by several apps."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

Actor = User | AnonymousUser  # who makes a request (`request.user`), as services receive it
RUN_JOBS = "jobs.run_jobs"  # the maintainer permission (declared on jobs.BenchmarkJob)


class CanRunJobs(BasePermission):
    """Anyone authenticated reads; starting or cancelling jobs and uploading boots needs `jobs.run_jobs`."""

    message = f"starting or cancelling jobs needs the maintainer permission ({RUN_JOBS})"

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return bool(request.user and request.user.has_perm(RUN_JOBS))


def can_run_context(request: HttpRequest) -> dict[str, bool]:
    """`can_run` in every page's context: whether the user holds `RUN_JOBS` (spelled nowhere else)."""
    user = getattr(request, "user", None)
    return {"can_run": bool(user is not None and user.has_perm(RUN_JOBS))}
