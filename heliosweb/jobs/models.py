"""Benchmark jobs and their stored events (the database is the source of truth; Redis is transport)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)


class BenchmarkJob(models.Model):
    kind = models.CharField(max_length=32)
    queue = models.CharField(max_length=16)
    recipe = models.ForeignKey("recipes.Recipe", null=True, blank=True, on_delete=models.PROTECT, related_name="jobs")
    params = models.JSONField(default=dict)
    catalog_sources = models.JSONField(
        default=dict,
        blank=True,
        help_text="per catalog parameter named by stored boots: each boot's id and, when repaired, "
        "what was replaced (the params keep the catalogs themselves, as the analysis validated them)",
    )
    trace_sources = models.JSONField(
        default=dict,
        blank=True,
        help_text="per trace parameter chosen by name: the stored trace's name, sha256 and requests "
        "(the params keep the requests themselves)",
    )
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    progress_message = models.CharField(max_length=200, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    last_seq = models.PositiveIntegerField(default=0, help_text="number of the last stored event")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker_host = models.CharField(max_length=255, blank=True)
    worker_pid = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [("run_jobs", "Can start and cancel benchmark jobs")]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.kind}, {self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    @property
    def progress_percent(self) -> int:
        if self.status == JobStatus.DONE:
            return 100
        if not self.progress_total:
            return 0
        return min(100, int(100 * self.progress_done / self.progress_total))


class JobEvent(models.Model):
    """One event of a job, numbered from 1 so a client can detect and refill gaps."""

    job = models.ForeignKey(BenchmarkJob, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=32)
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["job", "seq"]
        constraints = [models.UniqueConstraint(fields=["job", "seq"], name="one_event_per_seq")]

    def __str__(self) -> str:
        return f"job {self.job_id} event {self.seq} ({self.type})"

    def as_message(self) -> dict:
        return {**self.data, "type": self.type, "seq": self.seq}


class ResultReading(models.Model):
    """What the decision pages read of a finished job's result, made once when the result is
    stored (`jobs.result_reading`): a 19,000-request result is megabytes of per-request rows that
    a decision's trade-off reads only to compare them, so the comparisons are kept here beside the
    result less those rows, the analysis's text and the result's head. `version` is the job's state it was made
    from (`job_version`): a row of another version is stale and made again."""

    job = models.OneToOneField(BenchmarkJob, primary_key=True, on_delete=models.CASCADE, related_name="reading")
    version = models.CharField(max_length=200)
    lean = models.JSONField(help_text="the result less its per-request rows (or whole, where none were taken)")
    compared = models.JSONField(
        null=True, help_text="request_deltas per ordered pair of its policies; null: `lean` kept its rows"
    )
    text = models.TextField(blank=True, help_text="the analysis's text rendering (job_summary); empty: it has none")
    head = models.TextField(blank=True, help_text="the result's first characters as indented JSON (HEAD_CHARS)")

    def __str__(self) -> str:
        return f"reading of job {self.job_id} ({self.version})"
