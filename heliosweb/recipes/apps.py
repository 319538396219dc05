from django.apps import AppConfig


class RecipesConfig(AppConfig):
    name = "heliosweb.recipes"
    label = "recipes"
    default_auto_field = "django.db.models.BigAutoField"
