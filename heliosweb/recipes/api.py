"""The recipes JSON API: every recipe's active policy, creating and editing recipes, and the
emergency rollback (one recipe's policy, for engines, is `policy_poll`)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from heliosweb.common.api import ERROR, json_body, json_object, text_field
from heliosweb.common.bounds import DB_INT_MAX
from scheduler_core.policies import selectable_policies

from . import selectors, services

RECIPE = selectors.RECIPE.schema()
SHAPES, REQUIRED, HARDWARE = selectors.SHAPES, selectors.REQUIRED, selectors.HARDWARE
DESCRIPTION = text_field(max_length=services.MAX_DESCRIPTION)
RECIPE_CREATE = json_body(
    "RecipeCreate",
    {
        "name": serializers.RegexField(services.NAME.pattern, help_text="letters, digits, '-' or '_'; not 'new'"),
        "description": DESCRIPTION,
        "policy": serializers.ChoiceField(selectable_policies(), help_text="the initial policy (version 1)"),
        "shapes": SHAPES,
        "required_evidence": REQUIRED,
        "hardware": HARDWARE,
    },
)
RECIPE_EDIT = json_body(
    "RecipeEdit",
    {
        "description": DESCRIPTION,
        "shapes": SHAPES,
        "required_evidence": REQUIRED,
        "hardware": HARDWARE,
    },
)
ROLLBACK = json_body(
    "EmergencyRollback",
    {
        "reason": text_field(max_length=services.MAX_REASON, required=True),
        "from_version": serializers.IntegerField(
            min_value=-DB_INT_MAX - 1,
            max_value=DB_INT_MAX,
            help_text="the policy version being rolled back (the one the operator saw): 409 when it moved since",
        ),
    },
)


class RecipeListView(APIView):
    @extend_schema(responses={200: selectors.RECIPE_POLICY.schema(many=True)})
    def get(self, request: Request) -> Response:
        return Response(selectors.recipe_policies())

    @extend_schema(request=RECIPE_CREATE, responses={201: RECIPE, 400: ERROR, 403: ERROR})
    def post(self, request: Request) -> Response:
        data = json_object(request, RECIPE_CREATE)
        recipe = services.recipe_create(actor=request.user, **data)
        return Response(selectors.recipe_as_api(recipe), status=status.HTTP_201_CREATED)


class RecipeDetailView(APIView):
    @extend_schema(responses={200: RECIPE, 404: ERROR})
    def get(self, request: Request, name: str) -> Response:
        return Response(selectors.recipe_as_api(selectors.recipe_get(name=name)))

    @extend_schema(request=RECIPE_EDIT, responses={200: RECIPE, 400: ERROR, 403: ERROR, 404: ERROR})
    def patch(self, request: Request, name: str) -> Response:
        data = json_object(request, RECIPE_EDIT)
        recipe = services.recipe_update(recipe=selectors.recipe_get(name=name), actor=request.user, **data)
        return Response(selectors.recipe_as_api(recipe))


class RecipeRollbackView(APIView):
    """POST /api/recipes/<name>/rollback/ {reason, from_version}: the operator's emergency rollback."""

    @extend_schema(request=ROLLBACK, responses={200: RECIPE, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR})
    def post(self, request: Request, name: str) -> Response:
        data = json_object(request, ROLLBACK)
        recipe = selectors.recipe_get(name=name)
        services.policy_rollback_emergency(
            recipe=recipe, actor=request.user, reason=data.get("reason"), from_version=data.get("from_version")
        )
        return Response(selectors.recipe_as_api(selectors.recipe_get(name=name)))
