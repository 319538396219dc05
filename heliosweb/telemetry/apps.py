from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "heliosweb.telemetry"
    label = "telemetry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from heliosweb.jobs.registry import register_kind

        from .engine import KIND

        register_kind(KIND)
