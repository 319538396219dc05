"""The Celery app. Queues: `sim` (scheduler_core analyses) and `gpu` (gpu_runner; run it with
`--pool=solo`, one worker process per GPU, torch imported inside the task)."""

from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heliosweb.settings")

app = Celery("heliosweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("sim"), Queue("gpu"))
app.autodiscover_tasks()
