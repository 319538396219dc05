from django.apps import AppConfig


class SimEngineConfig(AppConfig):
    """The simulated engine (job kind `engine`), above telemetry (its API) and jobs (which run it). No models."""

    name = "heliosweb.simengine"
    label = "simengine"

    def ready(self) -> None:
        from heliosweb.jobs.registry import register_kind

        from .engine import KIND

        register_kind(KIND)
