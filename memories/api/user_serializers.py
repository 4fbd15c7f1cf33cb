"""Serializers of end users and rooms (input and output kept apart), and their pages."""

from __future__ import annotations

from rest_framework import serializers

from memories.api.fields import JSONObjectField, external_id_field, no_slash
from memories.api.pagination import page_serializer
from memories.models import EndUser, Room


class EndUserInputSerializer(serializers.Serializer):
    external_id = external_id_field()
    name = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    metadata = JSONObjectField(required=False, default=dict)

    def validate_external_id(self, value: str) -> str:
        no_slash(value)
        return value


class EndUserUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    metadata = JSONObjectField(required=False)


class EndUserOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = EndUser
        fields = ["external_id", "name", "metadata", "created_at", "updated_at"]


class RoomInputSerializer(EndUserInputSerializer):
    agent = external_id_field(required=False, allow_null=True)
    world_id = serializers.CharField(required=False, allow_blank=True, max_length=255, default="")


class RoomUpdateSerializer(EndUserUpdateSerializer):
    world_id = serializers.CharField(required=False, allow_blank=True, max_length=255)
    settings = serializers.JSONField(
        required=False,
        help_text="The room's own buffer and working-memory settings, over the project's "
        '(`{"buffer": {"max_size": 20}}`; null resets one to the project\'s value). '
        "Validated as in PATCH /api/v1/settings/.",
    )


class RoomOutputSerializer(serializers.ModelSerializer):
    agent = serializers.SerializerMethodField()

    class Meta:
        model = Room
        fields = [
            "external_id",
            "name",
            "agent",
            "world_id",
            "metadata",
            "settings",
            "created_at",
            "updated_at",
        ]
        extra_kwargs = {
            "settings": {"help_text": "The room's own overrides of the project's settings."}
        }

    def get_agent(self, room: Room) -> str | None:
        return room.agent.external_id if room.agent_id else None  # type: ignore[union-attr]


EndUserPageOutputSerializer = page_serializer(EndUserOutputSerializer, order="By external id.")
RoomPageOutputSerializer = page_serializer(RoomOutputSerializer, order="By external id.")
