from django.apps import AppConfig


class RecipesConfig(AppConfig):
    name = "heliosweb.recipes"
    label = "recipes"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the confusable-names check)
