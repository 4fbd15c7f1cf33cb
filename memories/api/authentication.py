"""`Authorization: Bearer <api key>`: the key becomes request.auth (and request.user),
its project loaded with it (memories.api.scoping.project_of)."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from memories.models import ApiKey
from memories.services.projects import api_key_authenticate


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        scheme, _, raw_key = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not raw_key.strip():
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <api key>'.")
        key = api_key_authenticate(raw_key=raw_key.strip())
        if key is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        return (key, key)

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'
