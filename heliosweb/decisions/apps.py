from django.apps import AppConfig


class DecisionsConfig(AppConfig):
    name = "heliosweb.decisions"
    label = "decisions"
    verbose_name = "Policy decisions"
    default_auto_field = "django.db.models.BigAutoField"
