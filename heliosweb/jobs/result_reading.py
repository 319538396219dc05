"""A finished job's result as the decision pages read it (`ResultReading`), made when it is stored.

Twenty cited jobs of 19,000 requests are about 140 MB of results; a decision's trade-off read and
compared every per-request row of them on its first view (15 s). The worker makes each job's
reading once, right after storing its result (`runner`), from the result it holds in memory:
the per-request comparisons of every ordered pair of its policies, the result less those rows,
the analysis's text and the result's first HEAD_CHARS as indented JSON (what compare shows). A job with no reading, or one made from an earlier state of the job (a
job stored by an older version, or rewritten), has it made on first read and stored, so each
result is read once, not once per view or per process.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from scheduler_core.comparison import every_request_deltas

from .models import BenchmarkJob, JobStatus, ResultReading
from .selectors import job_summary

log = logging.getLogger(__name__)
HEAD_CHARS = 20_000  # of a result as indented JSON, shown beside the others compared; the whole is in its downloads


def job_version(job: BenchmarkJob) -> str:
    """What changes when a job's result can: its id, creation, status, last event and finish."""
    finished = job.finished_at.isoformat() if job.finished_at else "-"
    return f"{job.pk}:{job.created_at.isoformat()}:{job.status}:{job.last_seq}:{finished}"


def reading_of(job: BenchmarkJob, result: Any) -> ResultReading:
    """The reading of `job` holding `result`: where its policies carry per-request rows and can be
    compared, the comparisons and the result without the rows; otherwise the result whole."""
    lean, compared = result, None
    policies = result.get("policies") if isinstance(result, dict) else None
    if isinstance(policies, list) and any(isinstance(p, dict) and "per_request" in p for p in policies):
        try:
            compared = every_request_deltas(policies)
        except (KeyError, TypeError, ValueError):  # rows the trade-off cannot read either: it says so
            log.warning("job %s: its per-request rows cannot be compared; kept whole", job.pk, exc_info=True)
        else:
            stripped = [{k: v for k, v in p.items() if k != "per_request"} for p in policies]
            lean = {**result, "policies": stripped}
    job.result = result
    head = json_head(result, HEAD_CHARS) if result is not None else ""
    return ResultReading(
        job=job, version=job_version(job), lean=lean, compared=compared, text=job_summary(job) or "", head=head
    )


def json_head(value: Any, chars: int) -> str:
    """The first `chars` characters of `value` as indented JSON, without writing the rest (a
    19,500-request result is 7 MB of it)."""
    head: list[str] = []
    size = 0
    for chunk in json.JSONEncoder(indent=2).iterencode(value):
        head.append(chunk)
        size += len(chunk)
        if size >= chars:
            break
    return "".join(head)[:chars]


def reading_store(job: BenchmarkJob, result: Any) -> ResultReading:
    """Make and store (or replace) the reading of a done job whose result is `result`."""
    reading = reading_of(job, result)
    ResultReading.objects.bulk_create(
        [reading],
        update_conflicts=True,
        unique_fields=["job"],
        update_fields=["version", "lean", "compared", "text", "head"],
    )
    return reading


def readings(jobs: Sequence[BenchmarkJob]) -> dict[int, ResultReading]:
    """The reading of each done job in `jobs` (which may come without their results:
    `.defer("result")`): stored ones as they are, the missing or stale ones made now, each such
    job's result read once."""
    done = [job for job in jobs if job.status == JobStatus.DONE]
    stored = {r.job_id: r for r in ResultReading.objects.filter(job__in=done)}
    found = {job.pk: stored[job.pk] for job in done if job.pk in stored and stored[job.pk].version == job_version(job)}
    todo = [job for job in done if job.pk not in found]
    if todo:
        results = dict(BenchmarkJob.objects.filter(pk__in=[j.pk for j in todo]).values_list("pk", "result"))
        for job in todo:
            found[job.pk] = reading_store(job, results.get(job.pk))
    return found
