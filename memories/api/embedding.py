"""The project's embedding model: which one it uses, the models it can switch to, and
the switch (memories/services/embedding_switch.py): start, follow, cancel."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api.schema import FIELD_ERRORS_REF
from memories.api.scoping import actor_of, idempotent, project_of
from memories.models import EmbeddingSwitch
from memories.services.embedding_spaces import choice_of, model_choices, project_space_read
from memories.services.embedding_switch import (
    SwitchRefused,
    embedding_switch_cancel,
    embedding_switch_start,
    last_switch,
    switch_progress,
)


class SwitchOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(
        choices=EmbeddingSwitch.Status.choices,
        help_text="running (the project still serves from the old model), completed (it "
        "serves from the new one), cancelled or failed (it never left the old one).",
    )
    from_model = serializers.CharField(help_text="The model switched from.")
    to_model = serializers.CharField(help_text="The model switched to.")
    done = serializers.IntegerField(help_text="Memories embedded by the new model so far.")
    total = serializers.IntegerField(
        help_text="Memories the new model lacked when the switch started (memories written "
        "since are embedded by both models as they come)."
    )
    rate_per_second = serializers.FloatField(allow_null=True)
    eta_seconds = serializers.IntegerField(allow_null=True, help_text="While running.")
    requested_by = serializers.CharField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    old_vectors_kept_until = serializers.DateTimeField(
        allow_null=True,
        help_text="A completed switch keeps the old model's vectors until then "
        "(EMBEDDING_SWITCH_KEEP_HOURS): switching back before that embeds only what was "
        "written since.",
    )
    error = serializers.CharField(help_text="Why it failed or who cancelled it.")

    def to_representation(self, instance: EmbeddingSwitch) -> dict[str, Any]:
        return super().to_representation(switch_progress(instance))  # type: ignore[no-any-return]


class ModelOutputSerializer(serializers.Serializer):
    key = serializers.CharField()
    provider = serializers.CharField()
    model = serializers.CharField()
    dimension = serializers.IntegerField()
    description = serializers.CharField()


class EmbeddingOutputSerializer(serializers.Serializer):
    model = serializers.CharField(
        help_text="The model the project's searches and contexts use now (the setting "
        "`embedding.model`): a key of `models`."
    )
    dimension = serializers.IntegerField()
    models = ModelOutputSerializer(many=True, help_text="The models it can switch to.")
    switch = SwitchOutputSerializer(allow_null=True, help_text="The last switch, if any.")


class SwitchInputSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="The key of the model to switch to (`models`).")


def _state(request: Request) -> dict[str, Any]:
    project = project_of(request)
    space = project_space_read(project.pk)
    return {
        "model": choice_of(space),
        "dimension": space.dimension,
        "models": [vars(choice) for choice in model_choices().values()],
        "switch": last_switch(project),
    }


@extend_schema(tags=["embedding"])
class EmbeddingView(APIView):
    @extend_schema(responses=EmbeddingOutputSerializer)
    def get(self, request: Request) -> Response:
        """The project's embedding model, the models it can switch to, and its last
        switch with its progress."""
        return Response(EmbeddingOutputSerializer(_state(request)).data)


@extend_schema(tags=["embedding"])
class EmbeddingSwitchView(APIView):
    @extend_schema(
        request=SwitchInputSerializer,
        responses={
            202: OpenApiResponse(
                SwitchOutputSerializer, description="Started: follow it at /api/v1/embedding/."
            ),
            400: OpenApiResponse(
                FIELD_ERRORS_REF,
                description="An unknown model, one not installed or whose files fail "
                "verification, the model in use, or a switch running: nothing changed.",
            ),
        },
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Switch the project to another embedding model, without downtime: a background
        job embeds every memory with the new model while searches and contexts keep using
        the old one (new writes are embedded by both), then the project flips at once.
        Switching back while the old vectors are kept is quick."""
        data = SwitchInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            switch = embedding_switch_start(
                project=project_of(request),
                model=data.validated_data["model"],
                actor=actor_of(request),
            )
        except SwitchRefused as error:
            raise serializers.ValidationError({"model": [str(error)]}) from None
        switch = EmbeddingSwitch.objects.select_related("source", "target").get(pk=switch.pk)
        return Response(SwitchOutputSerializer(switch).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(tags=["embedding"])
class EmbeddingSwitchCancelView(APIView):
    @extend_schema(
        request=None,
        responses={
            200: SwitchOutputSerializer,
            400: OpenApiResponse(FIELD_ERRORS_REF, description="No switch is running."),
        },
    )
    def post(self, request: Request) -> Response:
        """Cancel the running switch: the project keeps its model; what the new model
        embedded is dropped by the next sweep."""
        try:
            switch = embedding_switch_cancel(project=project_of(request), actor=actor_of(request))
        except SwitchRefused as error:
            raise serializers.ValidationError({"switch": [str(error)]}) from None
        switch = EmbeddingSwitch.objects.select_related("source", "target").get(pk=switch.pk)
        return Response(SwitchOutputSerializer(switch).data)
