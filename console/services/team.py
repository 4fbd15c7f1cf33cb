"""A project's team: the operators with a membership (editor or viewer), added, changed
and removed from the console without the admin.

Every change is recorded as a Django admin LogEntry on the project (content type
Project, object_id the project's pk), by the operator who made it: the admin's history
of the project shows it, and the console's Activity log reads it (there is no model of
membership changes). A project always keeps an editor: the last one can be neither
removed nor made a viewer (checked with the project's memberships locked).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q

from memories.models import Membership, Project

ROLES = tuple(Membership.Role.values)
TEAM_NOTE = "Team: "  # how a team change's LogEntry message starts (the admin's do not)
PASSWORD_BYTES = 12  # as create_operator's: 16 characters of URL-safe base64


class TeamError(Exception):
    """A change refused; ``field`` names the input at fault, nothing was changed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass
class Added:
    membership: Membership
    password: str = ""  # a new operator's, shown this once (only its hash is kept)


def team_get(*, project: Project) -> list[Membership]:
    """The project's memberships, editors first, then by username."""
    return list(
        Membership.objects.filter(project=project)
        .select_related("user")
        .order_by("role", "user__username")  # "editor" < "viewer"
    )


def _role(role: str) -> str:
    if role not in ROLES:
        raise TeamError("role", f"one of {', '.join(ROLES)}.")
    return role


def _record(*, project: Project, by: Any, flag: int, message: str) -> None:
    LogEntry.objects.create(
        user_id=by.pk,
        content_type=ContentType.objects.get_for_model(Project),
        object_id=str(project.pk),
        object_repr=str(project)[:200],
        action_flag=flag,
        change_message=f"{TEAM_NOTE}{message}",
    )


def _existing(identifier: str) -> Any:
    """The operator with this username, else this e-mail (one only)."""
    users = get_user_model().objects
    found = users.filter(username=identifier).first()
    if found is not None:
        return found
    by_email = list(users.filter(email__iexact=identifier)[:2])
    if len(by_email) > 1:
        raise TeamError("operator", "several operators have this e-mail: give the username.")
    if not by_email:
        raise TeamError("operator", f"no operator has the username or e-mail {identifier!r}.")
    return by_email[0]


def _new_operator(*, username: str, email: str) -> tuple[Any, str]:
    """A new console login (not staff: no admin), with a generated password."""
    model = get_user_model()
    if not username:
        raise TeamError("username", "required for a new operator.")
    if len(username) > 150:
        raise TeamError("username", "at most 150 characters.")
    try:
        model.username_validator(username)
    except ValidationError:
        raise TeamError("username", "letters, digits and @ . + - _ only.") from None
    try:
        validate_email(email)
    except ValidationError:
        raise TeamError("email", "not an e-mail address.") from None
    if model.objects.filter(Q(username=username) | Q(email__iexact=email)).exists():
        raise TeamError("username", "an operator with this username or e-mail exists: add them.")
    password = secrets.token_urlsafe(PASSWORD_BYTES)
    return model.objects.create_user(username=username, email=email, password=password), password


@transaction.atomic
def teammate_add(
    *, project: Project, by: Any, role: str, operator: str = "", username: str = "", email: str = ""
) -> Added:
    """Give an operator a role in the project: an existing one (``operator``: username
    or e-mail) or a new one (``username`` and ``email``; its password is returned, this
    once). Raises TeamError naming the field; then nothing is written."""
    role = _role(role)
    operator, username, email = operator.strip(), username.strip(), email.strip()
    password = ""
    if operator:
        user = _existing(operator)
    else:
        user, password = _new_operator(username=username, email=email)
    if user.is_superuser:
        raise TeamError("operator", f"{user.get_username()} is a superuser: sees every project.")
    if Membership.objects.filter(project=project, user=user).exists():
        raise TeamError("operator", f"{user.get_username()} is in the team already.")
    membership = Membership.objects.create(project=project, user=user, role=role)
    new = " (a new operator)" if password else ""
    _record(
        project=project, by=by, flag=ADDITION, message=f"added {user.get_username()}{new} as {role}"
    )
    return Added(membership=membership, password=password)


def _locked(project: Project, membership_id: int) -> tuple[Membership, int]:
    """The membership (locked with every one of the project) and the editors' count."""
    team = list(
        Membership.objects.filter(project=project).select_for_update().select_related("user")
    )
    membership = next((m for m in team if m.pk == membership_id), None)
    if membership is None:
        raise TeamError("membership", "not a member of this project's team.")
    return membership, sum(m.role == Membership.Role.EDITOR for m in team)


@transaction.atomic
def teammate_role_set(*, project: Project, by: Any, membership_id: int, role: str) -> Membership:
    """Make a teammate an editor or a viewer (not the last editor a viewer)."""
    role = _role(role)
    membership, editors = _locked(project, membership_id)
    if membership.role == role:
        return membership
    if membership.can_edit and editors == 1:
        raise TeamError("role", "the project's last editor stays one: make another first.")
    before, membership.role = membership.role, role
    membership.save(update_fields=["role"])
    name = membership.user.get_username()
    _record(project=project, by=by, flag=CHANGE, message=f"made {name} {role} (was {before})")
    return membership


@transaction.atomic
def teammate_remove(*, project: Project, by: Any, membership_id: int) -> str:
    """Take a teammate off the team (the login stays); their username."""
    membership, editors = _locked(project, membership_id)
    if membership.can_edit and editors == 1:
        raise TeamError("membership", "the project's last editor cannot be removed.")
    name = membership.user.get_username()
    membership.delete()
    _record(project=project, by=by, flag=DELETION, message=f"removed {name} ({membership.role})")
    return name
