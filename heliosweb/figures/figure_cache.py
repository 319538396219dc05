"""A finished job's `/figures/` answer, kept once built: a finished job's figures never change.

Kept in the `figures` cache (settings.CACHES: local memory, bounded, no database or Redis round
trip for a payload of up to 2 MB). The key holds what the answer is built from: the job (id and
creation time, so a reused id in a rolled-back test database is another key), its status and last
event number, when it finished, and a version of the code that builds figures (a hash of this
package's source and Plotly's version), so a changed job or changed figures code is another key and
is built afresh. A running or queued job is never cached: its figures grow with every event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import cache
from pathlib import Path

import plotly
from django.core.cache import caches

from heliosweb.jobs.models import BenchmarkJob

ALIAS = "figures"


@cache
def code_version() -> str:
    """What the figures are built by: this package's source files and the Plotly version."""
    digest = hashlib.sha256(plotly.__version__.encode())
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _key(job: BenchmarkJob, variant: str) -> str:
    finished = job.finished_at.isoformat() if job.finished_at else "-"
    made = f"{job.pk}:{job.created_at.isoformat()}:{job.status}:{job.last_seq}:{finished}"
    return f"figures:{code_version()}:{made}:{hashlib.sha256(variant.encode()).hexdigest()[:16]}"


def figures_json(job: BenchmarkJob, build: Callable[[], str], *, variant: str = "") -> str:
    """The job's `/figures/` text: from the cache for a finished job (built by `build` once per
    `variant`: the pair its deltas compare), always built for one still queued or running."""
    if not job.is_finished:
        return build()
    store = caches[ALIAS]
    key = _key(job, variant)
    text = store.get(key)
    if text is None:
        text = build()
        store.set(key, text, timeout=None)
    return text
