"""A user's synopsis: read it (with each part's freshness), edit or lock a part, and
ask for its regeneration."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api.scoping import actor_of, end_user_get, idempotent, project_of
from memories.api.working import ErrorOutputSerializer
from memories.models import EndUser, Synopsis
from memories.models.synopsis import PARTS
from memories.services.configuration import project_settings_get
from memories.services.synopsis import (
    FRESH,
    MAX_TEXT_CHARS,
    MISSING,
    STALE,
    SynopsisError,
    SynopsisUnavailable,
    SynopsisView,
    synopsis_get,
    synopsis_part_edit,
    synopsis_part_lock,
    synopsis_refresh_request,
    synopsis_view,
)

RETRY_AFTER_SECONDS = 5
TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")


class SynopsisPartOutputSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="Empty while the part is missing.")
    generated_at = serializers.DateTimeField(
        allow_null=True, help_text="When its material was read, or an operator wrote it."
    )
    age_seconds = serializers.FloatField(allow_null=True)
    ttl_seconds = serializers.FloatField(
        help_text="synopsis.identity_ttl_hours or synopsis.context_ttl_hours, in seconds."
    )
    freshness = serializers.ChoiceField(
        choices=[FRESH, STALE, MISSING],
        help_text="missing: never generated; stale: older than its TTL; fresh otherwise. A "
        "locked part with text is fresh whatever its age.",
    )
    locked = serializers.BooleanField(help_text="Never regenerated while locked.")
    generator = serializers.CharField(
        help_text='"template", "llm:<model>" or "operator"; a template used because the LLM '
        'failed says so ("template; llm:<model> failed: refusal").'
    )
    token_count = serializers.IntegerField(help_text="cl100k_base tokens of the text.")
    source_ids = serializers.ListField(
        child=serializers.CharField(), help_text="The memories it was made from."
    )
    edited_by = serializers.CharField(help_text="Who last edited or locked it (type:name).")


class SynopsisOutputSerializer(serializers.Serializer):
    user = serializers.CharField(help_text="The user's external id.")
    identity = SynopsisPartOutputSerializer(
        help_text="Who the user is: name, stable preferences, traits (from facts)."
    )
    context = SynopsisPartOutputSerializer(  # type: ignore[assignment]  # popped by DRF
        help_text="What the user is in the middle of: open goals, recent topics."
    )
    refresh_scheduled = serializers.BooleanField(
        help_text="A regeneration of a stale or missing part is queued."
    )


class SynopsisPartInputSerializer(serializers.Serializer):
    text = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=MAX_TEXT_CHARS,
        help_text="The part's new text (at most synopsis.max_tokens tokens); the part is "
        "then locked unless locked is false.",
    )
    locked = serializers.BooleanField(
        required=False, help_text="Lock the part against regeneration, or unlock it."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("Give text and/or locked.")
        return attrs


class SynopsisUpdateInputSerializer(serializers.Serializer):
    identity = SynopsisPartInputSerializer(required=False)
    context = SynopsisPartInputSerializer(required=False)  # type: ignore[assignment]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(self.initial_data) - set(PARTS))
        if unknown:
            raise serializers.ValidationError(
                {name: [f"Unknown part; parts: {', '.join(PARTS)}."] for name in unknown}
            )
        if not attrs:
            raise serializers.ValidationError(
                {"non_field_errors": ["Give identity and/or context."]}
            )
        return attrs


class SynopsisRefreshInputSerializer(serializers.Serializer):
    parts = serializers.ListField(
        child=serializers.ChoiceField(choices=PARTS),
        required=False,
        allow_empty=False,
        help_text="The parts to regenerate; default both. Locked parts are left out.",
    )


class SynopsisRefreshOutputSerializer(serializers.Serializer):
    user = serializers.CharField()
    parts = serializers.ListField(
        child=serializers.CharField(), help_text="The parts queued for regeneration."
    )
    locked = serializers.ListField(
        child=serializers.CharField(), help_text="The parts asked for but locked: left as is."
    )


class SynopsisUnavailableError(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The regeneration could not be queued (Redis unreachable); retry later."
    default_code = "synopsis_unavailable"
    wait = RETRY_AFTER_SECONDS  # DRF's handler sends it as Retry-After


def _user(request: Request, external_id: str) -> EndUser:
    """The caller's user, with the caller's project attached (no query for it)."""
    user = end_user_get(request, external_id)
    user.project = project_of(request)
    return user


def _output(user: EndUser, view: SynopsisView) -> dict[str, Any]:
    return SynopsisOutputSerializer(
        {
            "user": user.external_id,
            "identity": view.identity,
            "context": view.context,
            "refresh_scheduled": view.refresh_scheduled,
        }
    ).data


def _refresh_param(request: Request) -> bool | None:
    value = request.query_params.get("refresh")
    if value is None or value == "":
        return None
    if value.lower() in TRUE + FALSE:
        return value.lower() in TRUE
    raise serializers.ValidationError({"refresh": ["Must be true or false."]})


@extend_schema(tags=["synopsis"])
class EndUserSynopsisView(APIView):
    @extend_schema(
        operation_id="v1_users_synopsis_retrieve",
        parameters=[
            OpenApiParameter(
                "refresh",
                bool,
                description="Queue the regeneration of a stale or missing unlocked part "
                "(default: the project's synopsis.refresh_on_access).",
            )
        ],
        responses=SynopsisOutputSerializer,
    )
    def get(self, request: Request, external_id: str) -> Response:
        """The user's synopsis: each part's text, age and freshness. A stale or missing
        part is served as it is, and (refresh on access) its regeneration queued."""
        refresh = _refresh_param(request)
        user = _user(request, external_id)
        return Response(_output(user, synopsis_get(end_user=user, refresh_on_access=refresh)))

    @extend_schema(
        operation_id="v1_users_synopsis_partial_update",
        request=SynopsisUpdateInputSerializer,
        responses={200: SynopsisOutputSerializer},
    )
    def patch(self, request: Request, external_id: str) -> Response:
        """Edit and/or lock a part: ``{"identity": {"text": "...", "locked": true}}``.
        New text locks the part unless ``locked`` is false; recorded with the key."""
        data = SynopsisUpdateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = _user(request, external_id)
        actor = actor_of(request)
        row: Synopsis | None = None
        try:
            with transaction.atomic():
                for part, change in data.validated_data.items():
                    if "text" in change:
                        row = synopsis_part_edit(
                            end_user=user,
                            part=part,
                            text=change["text"],
                            actor=actor,
                            lock=change.get("locked", True),
                        )
                    else:
                        row = synopsis_part_lock(
                            end_user=user, part=part, locked=change["locked"], actor=actor
                        )
        except SynopsisError as error:
            raise serializers.ValidationError(error.errors) from None
        config = project_settings_get(project=user.project).synopsis
        return Response(_output(user, synopsis_view(synopsis=row, config=config)))


@extend_schema(tags=["synopsis"])
class EndUserSynopsisRefreshView(APIView):
    @extend_schema(
        request=SynopsisRefreshInputSerializer,
        responses={
            202: SynopsisRefreshOutputSerializer,
            409: OpenApiResponse(ErrorOutputSerializer, description="Every part asked is locked."),
            503: OpenApiResponse(ErrorOutputSerializer, description="Redis unreachable."),
        },
    )
    @idempotent
    def post(self, request: Request, external_id: str) -> Response:
        """Queue the regeneration of the user's unlocked parts, fresh or not (a worker
        writes them; GET shows the result). Locked parts are left as they are."""
        data = SynopsisRefreshInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        asked = [part for part in PARTS if part in data.validated_data.get("parts", PARTS)]
        user = _user(request, external_id)
        row = Synopsis.objects.filter(end_user=user).first()
        locked = [part for part in asked if row is not None and row.part(part).locked]
        parts = [part for part in asked if part not in locked]
        if not parts:
            return Response(
                {"detail": f"Locked, so not regenerated: {', '.join(locked)}. Unlock first."},
                status=status.HTTP_409_CONFLICT,
            )
        try:
            parts = synopsis_refresh_request(end_user=user, parts=parts, force=True)
        except SynopsisUnavailable:
            raise SynopsisUnavailableError() from None
        if not parts:  # no generator installed
            raise SynopsisUnavailableError()
        return Response(
            SynopsisRefreshOutputSerializer(
                {"user": user.external_id, "parts": parts, "locked": locked}
            ).data,
            status=status.HTTP_202_ACCEPTED,
        )
