"""Console logins for the console's tests: an operator with a role in a project."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.test import Client

from memories.models import Membership, Project

PASSWORD = "correct horse battery staple"


def operator_client(
    username: str,
    *,
    project: Project | None = None,
    role: str = "editor",
    superuser: bool = False,
    enforce_csrf_checks: bool = False,
) -> Client:
    """A test client logged in as a new operator (a member of ``project`` in ``role``)."""
    # no password: hashing one costs ~0.3 s, and force_login needs none
    user = get_user_model().objects.create_user(
        username=username, is_superuser=superuser, is_staff=superuser
    )
    if project is not None:
        Membership.objects.create(user=user, project=project, role=role)
    client = Client(enforce_csrf_checks=enforce_csrf_checks)
    client.force_login(user)
    client.user = user  # type: ignore[attr-defined]
    return client
