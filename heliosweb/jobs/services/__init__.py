"""Writes for benchmark jobs, one module per stage of a job's life:

- `submission`: `job_create` (the one place input is validated, then queued) and `job_cancel`;
- `runner`: `job_run`, the Celery task's body (claim, run the analysis, finish);
- `pump`: `EventPump`, which numbers, stores and sends a running job's events in batches;
- `reaper`: `jobs_reap`, which fails jobs whose worker vanished;
- `workers`: which workers are alive (a heartbeat each), and the jobs waiting on a frozen one;
- `events`: what they share: storing one event, sending batches, announcing a job to the lists,
  `job_end` (a terminal status and its event, together) and `job_fail`.
"""
