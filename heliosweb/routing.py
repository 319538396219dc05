"""Every websocket route of the project."""

from django.urls import path, re_path

from heliosweb.jobs.consumers import JobConsumer, JobListConsumer
from heliosweb.realtime.streams import UnknownStream
from heliosweb.recipes.consumers import RecipesConsumer
from heliosweb.telemetry.consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/jobs/", JobListConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/", JobConsumer.as_asgi()),
    path("ws/recipes/", RecipesConsumer.as_asgi()),
    path("ws/recipes/<slug:name>/live/", LiveConsumer.as_asgi()),
    re_path(r"", UnknownStream.as_asgi()),  # last: any other path closes with 4404
]
