"""The Celery app. Queues: `sim` (scheduler_core analyses), `gpu` (gpu_runner; run it with
`--pool=solo`, one worker process per GPU, torch imported inside the task) and `engine` (the
long-running simulated engines, a thread each: they never hold the `sim` slot)."""

from __future__ import annotations

import os

from celery import Celery
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heliosweb.settings")

app = Celery("heliosweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Jobs are sent by queue name (Celery's anonymous exchange), so routing never depended on this;
# naming each queue's own exchange and key keeps the worker's banner from listing gpu under sim's.
app.conf.task_queues = tuple(Queue(name, Exchange(name), routing_key=name) for name in ("sim", "gpu", "engine"))
app.autodiscover_tasks()
