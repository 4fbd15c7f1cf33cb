"""Projects (tenants) and their API keys."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import hmac
import secrets
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memories.models import ApiKey, EndUser, Memory, Project, Room
from memories.providers.kept import Kept
from memories.services.concurrency import deadlock_retried, memories_lock
from memories.services.erasure import admin_log_erase
from memories.services.erasure_synopsis import synopsis_caches_drop
from memories.services.exports import chunked
from memories.services.working import WorkingMemoryUnavailable, working_clear

KEY_PREFIX = "mh_"
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _hash(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


def project_get_or_create(*, name: str) -> tuple[Project, bool]:
    """The project called ``name``, created if it does not exist yet."""
    return Project.objects.get_or_create(name=name)


def project_delete(*, project: Project) -> bool:
    """Delete a project and everything it holds (its revisions too), and after the
    commit what it kept in Redis; False if it was gone already.

    The project's row is locked first, then its memories in primary-key order (the
    lock order: concurrency.py): a worker embedding, summarizing or ingesting for it has
    committed by then (its rows are deleted with the rest), or waits and finds the
    project gone. The database's ON DELETE CASCADE removes anything a writer outside
    that order committed after Django's collector read the project's rows."""
    return deadlock_retried(lambda: _project_delete(project))


def _project_delete(project: Project) -> bool:
    locked = Project.objects.select_for_update().filter(pk=project.pk).first()
    if locked is None:
        return False
    memories = memories_lock(Memory.objects.for_project(locked))
    users = list(EndUser.objects.filter(project=locked).values_list("pk", flat=True))
    rooms = list(Room.objects.filter(project=locked).values_list("pk", flat=True))
    # the admin's log keeps who did what, not the words (its rows outlive the project)
    for model, pks in (("memories.memory", memories), ("memories.enduser", users)):
        for chunk in chunked(pks):
            admin_log_erase(model, chunk)
    locked.delete()
    transaction.on_commit(partial(_redis_forget, locked.pk, users, rooms))
    return True


def _redis_forget(project_id: int, users: list[int], rooms: list[int]) -> None:
    """What the project left in Redis: its users' cached synopses and its rooms'
    working memory (Redis down: they expire, the trim clears rooms that are gone)."""
    synopsis_caches_drop(users)
    for room_id in rooms:
        with contextlib.suppress(WorkingMemoryUnavailable):
            working_clear(room=Room(pk=room_id, project_id=project_id))


@transaction.atomic
def api_key_create(
    *, project: Project, name: str = "", read_only: bool = False
) -> tuple[ApiKey, str]:
    """A new key for the project; the raw key is returned once and never stored."""
    prefix = secrets.token_hex(4)
    raw_key = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    scopes = [ApiKey.Scope.READ] if read_only else [ApiKey.Scope.READ, ApiKey.Scope.WRITE]
    key = ApiKey.objects.create(
        project=project, name=name, prefix=prefix, key_hash=_hash(raw_key), scopes=scopes
    )
    return key, raw_key


# verified keys (with their projects) by hash, for LOOKUP_CACHE_SECONDS: a statement
# and ~0.6 ms of ORM work less per request. A change to a key or a project (revoked,
# deleted, settings) forgets them all in the process that made it (apps.py); the
# others see it within that time.
_verified: Kept[ApiKey] = Kept(settings.LOOKUP_CACHE_SECONDS)


def api_key_authenticate(*, raw_key: str) -> ApiKey | None:
    """The active key matching ``raw_key`` with its project (the caller's own copies),
    or None. Touches last_used_at once a minute."""
    if not raw_key.startswith(KEY_PREFIX) or raw_key.count("_") < 2:
        return None
    digest = _hash(raw_key)
    key = _verified.get(digest)
    if key is None:
        prefix = raw_key[len(KEY_PREFIX) :].split("_", 1)[0]
        key = ApiKey.objects.active().select_related("project").filter(prefix=prefix).first()
        if key is None or not hmac.compare_digest(key.key_hash, digest):
            return None
        _verified.put(digest, key)
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    mine = copy.copy(key)  # a request may change its key or project: never the kept ones
    mine.project = copy.copy(key.project)
    return mine


def api_keys_forget(**_: object) -> None:
    """Forget the verified keys (a key or project changed; connected in apps.py)."""
    _verified.clear()


def api_key_revoke(*, key: ApiKey) -> None:
    """Revoke a key: it authenticates nothing from now on."""
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
