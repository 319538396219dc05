"""Every websocket route of the project."""

from django.urls import path

from heliosweb.jobs.consumers import JobConsumer, JobListConsumer
from heliosweb.recipes.consumers import RecipesConsumer

websocket_urlpatterns = [
    path("ws/jobs/", JobListConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/", JobConsumer.as_asgi()),
    path("ws/recipes/", RecipesConsumer.as_asgi()),
]
