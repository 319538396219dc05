from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "heliosweb.telemetry"
    label = "telemetry"
    default_auto_field = "django.db.models.BigAutoField"
