from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "heliosweb.dashboard"
    label = "dashboard"
    default_auto_field = "django.db.models.BigAutoField"
