"""OpenAPI: API-key authentication as an HTTP bearer scheme, and every error response
an operation can give, with its JSON body (so the schema says what the API does)."""

from __future__ import annotations

import copy
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiParameter
from rest_framework import permissions


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "memories.api.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):  # type: ignore[no-untyped-def]
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A project API key: `Authorization: Bearer mh_...`",
        }


ERROR_SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": {
        "type": "object",
        "description": "What went wrong, in words.",
        "properties": {"detail": {"type": "string"}},
        "required": ["detail"],
    },
    "FieldErrors": {
        "type": "object",
        "description": 'Messages by field (`{"metadata": ["..."]}`; a batch or import '
        "names the item), or a `detail` for the request as a whole.",
        "additionalProperties": {},
    },
    "TooLargeError": {
        "type": "object",
        "description": "The body or query string is over its limit, in bytes.",
        "properties": {"detail": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["detail", "limit"],
    },
    "UnavailableError": {
        "type": "object",
        "description": "A service the request needs is unreachable; retry after Retry-After.",
        "properties": {
            "detail": {"type": "string"},
            "service": {"type": "string", "enum": ["database", "redis"]},
        },
        "required": ["detail"],
    },
}
# for a view's own error responses: @extend_schema(responses={409: OpenApiResponse(...)})
FIELD_ERRORS_REF = {"$ref": "#/components/schemas/FieldErrors"}
ERROR_REF = {"$ref": "#/components/schemas/Error"}
RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}}
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="Makes a retry safe: the same key with the same request replays the first "
    "response; with another request it is a 422. At most 255 characters.",
)
BODY_METHODS = ("POST", "PUT", "PATCH")


class ApiAutoSchema(AutoSchema):
    """drf-spectacular's schema, each /api/v1/ operation with the error responses it can
    give besides the ones its view declares."""

    def _view_method(self) -> Any:
        return getattr(self.view, self.method.lower(), None)

    def _idempotent(self) -> bool:
        return bool(getattr(self._view_method(), "idempotency_key", False))

    def get_override_parameters(self) -> list[Any]:
        parameters = list(super().get_override_parameters())
        if self._idempotent():
            parameters.append(IDEMPOTENCY_KEY)
        return parameters

    def _error_codes(self) -> dict[str, tuple[str, str]]:
        """Status code -> (error schema, description) of this operation."""
        codes = {
            "400": ("FieldErrors", "Invalid input: each message under the field it names."),
            "413": ("TooLargeError", "The body or the query string is over its limit."),
            "429": ("Error", "Over the API key's rate limit (the project's `limits`)."),
            "503": ("UnavailableError", "PostgreSQL or Redis unreachable."),
        }
        if self.get_auth():
            codes["401"] = ("Error", "No API key, or an unknown or revoked one.")
        writes = self.method not in permissions.SAFE_METHODS
        if writes and not getattr(self.view, "read_only_post", False):
            codes["403"] = ("Error", "A read-only API key.")
        if "{" in self.path:
            codes["404"] = ("Error", "No such object in the key's project.")
        if self.method in BODY_METHODS and self.get_request_serializer() is not None:
            codes["415"] = ("Error", "The body is not `application/json`.")
        if self._idempotent():
            codes["422"] = ("Error", "This Idempotency-Key was used with another request.")
        return codes

    def _error_ref(self, name: str) -> dict[str, str]:
        # a copy: the enum post-processing rewrites a component's schema in place (its
        # "service" enum became a $ref to ServiceEnum), so a second schema of the same
        # process (/api/schema/ asked twice) referred to a ServiceEnum it no longer had
        schema = copy.deepcopy(ERROR_SCHEMAS[name])
        component = ResolvedComponent(
            name=name, type=ResolvedComponent.SCHEMA, schema=schema, object=name
        )
        self.registry.register_on_missing(component)
        return component.ref

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        if direction != "response" or not self.path.startswith("/api/v1/"):
            return responses
        for code, (name, description) in self._error_codes().items():
            if code in responses:
                if code in ("429", "503"):
                    responses[code].setdefault("headers", RETRY_AFTER)
                continue
            response: dict[str, Any] = {
                "description": description,
                "content": {"application/json": {"schema": self._error_ref(name)}},
            }
            if code in ("429", "503"):
                response["headers"] = RETRY_AFTER
            responses[code] = response
        return dict(sorted(responses.items()))
