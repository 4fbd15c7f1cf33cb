"""Read keys may read; writing needs the write scope."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from memories.models import ApiKey


class HasProjectScope(permissions.BasePermission):
    message = "This API key is read-only."

    def has_permission(self, request: Request, view: Any) -> bool:
        key = request.auth
        if not isinstance(key, ApiKey):
            return False
        if request.method in permissions.SAFE_METHODS or getattr(view, "read_only_post", False):
            return True
        return key.can_write
