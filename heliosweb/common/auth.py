"""API authentication (`REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]`, next to the session)."""

from rest_framework.authentication import TokenAuthentication


class BearerTokenAuthentication(TokenAuthentication):
    """`Authorization: Bearer <token>`; tokens come from `manage.py create_api_token <username>`."""

    keyword = "Bearer"
