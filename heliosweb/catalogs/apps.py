from django.apps import AppConfig


class CatalogsConfig(AppConfig):
    name = "heliosweb.catalogs"
    label = "catalogs"
    default_auto_field = "django.db.models.BigAutoField"
