from django.apps import AppConfig


class CommonConfig(AppConfig):
    """No models: an app only so its management command (`create_api_token`) is found."""

    name = "heliosweb.common"
    label = "common"
