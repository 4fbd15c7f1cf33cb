"""The user synopsis as agents and operators see it: read (cached in Redis:
memories/services/synopsis_cache.py), edited and locked by operators, stored by the
generator (synopsis/services/synopses.py), and refreshed: a read of a stale part
serves it and asks for its regeneration (memories/services/synopsis_refresh.py).

Freshness is computed at read time from the project's TTLs (``synopsis`` settings): a
part is *missing* until first written, *stale* once older than its TTL, *fresh*
otherwise; a locked part that has text is fresh whatever its age (the operator's word
holds until it is unlocked).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis
from django.db import transaction
from django.utils import timezone

from memories.config import SynopsisSettings
from memories.models import EndUser, Memory, Synopsis, SynopsisPart, SynopsisRevision
from memories.models.synopsis import PARTS
from memories.providers.tokens import token_count
from memories.services.configuration import project_settings_get
from memories.services.revisions import Actor
from memories.services.synopsis_cache import (
    SynopsisStored,
    synopsis_cache_get,
    synopsis_cache_put,
    synopsis_cache_put_on_commit,
)
from memories.services.synopsis_refresh import SynopsisUnavailable, synopsis_refresh_queue

logger = logging.getLogger(__name__)

FRESH, STALE, MISSING = "fresh", "stale", "missing"
OPERATOR = "operator"  # the generator of a part an operator or agent wrote
MAX_TEXT_CHARS = 20_000


class SynopsisError(ValueError):
    """An edit that cannot be made: ``errors`` maps a field (``identity.text``) to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{key}: {' '.join(m)}" for key, m in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class SynopsisPartView:
    """A part as a reader gets it: the stored part and its freshness now."""

    part: str
    text: str
    generated_at: datetime | None
    age_seconds: float | None
    ttl_seconds: float
    freshness: str  # FRESH, STALE or MISSING
    locked: bool
    generator: str
    token_count: int
    source_ids: list[str]
    edited_by: str


@dataclass(frozen=True)
class SynopsisView:
    identity: SynopsisPartView
    context: SynopsisPartView
    refresh_scheduled: bool  # a regeneration of a stale or missing part is on its way

    @property
    def parts(self) -> tuple[SynopsisPartView, SynopsisPartView]:
        return (self.identity, self.context)


@dataclass(frozen=True)
class SynopsisDraft:
    """A generated part, ready to store: ``generated_at`` is when its material was read."""

    part: str
    text: str
    generator: str
    source_ids: list[str]
    generated_at: datetime


# --- reading ---------------------------------------------------------------------------


def synopsis_get(*, end_user: EndUser, refresh_on_access: bool | None = None) -> SynopsisView:
    """The user's synopsis with each part's freshness; from Redis when cached (one round
    trip), else from the database. With ``refresh_on_access`` (default: the project's
    setting), a stale or missing unlocked part is served as it is and its regeneration
    queued (once per burst of reads). Redis unreachable: read from the database, nothing
    queued."""
    config = project_settings_get(project=end_user.project).synopsis
    reachable = True
    stored = None
    try:
        stored = synopsis_cache_get(end_user_id=end_user.pk)
    except redis.RedisError as error:
        logger.warning("synopsis cache unreachable (%s); reading the database", error)
        reachable = False
    if stored is None:
        stored = SynopsisStored.of(Synopsis.objects.filter(end_user=end_user).first())
        if reachable:
            synopsis_cache_put(end_user_id=end_user.pk, stored=stored)
    view = _view(stored, config, refresh_scheduled=False)
    refresh = config.refresh_on_access if refresh_on_access is None else refresh_on_access
    due = [p.part for p in view.parts if p.freshness != FRESH and not p.locked]
    if not (refresh and due and reachable):
        return view
    try:
        pending = synopsis_refresh_queue(end_user=end_user, parts=due, force=False)
    except SynopsisUnavailable as error:
        logger.warning("could not queue the synopsis of user %s: %s", end_user.pk, error)
        return view
    return SynopsisView(view.identity, view.context, refresh_scheduled=bool(pending))


def synopsis_view(*, synopsis: Synopsis | None, config: SynopsisSettings) -> SynopsisView:
    """The view of a row as it is now (e.g. right after a write), nothing queued."""
    return _view(SynopsisStored.of(synopsis), config, refresh_scheduled=False)


def synopsis_ttl_seconds(*, config: SynopsisSettings, part: str) -> float:
    """How long a generated part stays fresh under these settings."""
    hours = config.identity_ttl_hours if part == "identity" else config.context_ttl_hours
    return hours * 3600.0


def synopsis_part_freshness(*, part: SynopsisPart | None, ttl_seconds: float, now: datetime) -> str:
    """FRESH, STALE or MISSING (see the module)."""
    if part is None or part.generated_at is None:
        return MISSING
    if part.locked or (now - part.generated_at).total_seconds() <= ttl_seconds:
        return FRESH
    return STALE


def _view(
    stored: SynopsisStored, config: SynopsisSettings, *, refresh_scheduled: bool
) -> SynopsisView:
    now = timezone.now()
    views = []
    for name in PARTS:
        part = stored.parts[name]
        ttl = synopsis_ttl_seconds(config=config, part=name)
        generated_at = part.generated_at if part else None
        views.append(
            SynopsisPartView(
                part=name,
                text=part.text if part else "",
                generated_at=generated_at,
                age_seconds=(now - generated_at).total_seconds() if generated_at else None,
                ttl_seconds=ttl,
                freshness=synopsis_part_freshness(part=part, ttl_seconds=ttl, now=now),
                locked=part.locked if part else False,
                generator=part.generator if part else "",
                token_count=part.token_count if part else 0,
                source_ids=part.source_ids if part else [],
                edited_by=part.edited_by if part else "",
            )
        )
    return SynopsisView(views[0], views[1], refresh_scheduled=refresh_scheduled)


# --- writing ---------------------------------------------------------------------------


def _row_locked(end_user: EndUser) -> Synopsis:
    """The user's synopsis row, created if new, locked until the transaction ends."""
    row, _ = Synopsis.objects.select_for_update().get_or_create(
        end_user=end_user, defaults={"project_id": end_user.project_id}
    )
    return row


def _save(row: Synopsis, columns: list[str]) -> None:
    row.version += 1
    row.save(update_fields=[*columns, "version", "updated_at"])
    synopsis_cache_put_on_commit(row=row)


@transaction.atomic
def synopsis_store(*, end_user: EndUser, drafts: Sequence[SynopsisDraft]) -> list[str]:
    """Save generated parts; a locked part, one written after the draft's material was
    read (a newer generation, an edit), and a draft made of a memory erased meanwhile
    (its words must not come back: memories.services.erasure clears the part under
    the same row lock) are left as they are. Returns the parts saved."""
    row = _row_locked(end_user)
    saved: list[str] = []
    columns: list[str] = []
    for draft in drafts:
        current = row.part(draft.part)
        if current.locked or (
            current.generated_at is not None and current.generated_at > draft.generated_at
        ):
            continue
        if _sources_gone(end_user, draft.source_ids):
            continue
        columns += row.part_set(
            draft.part,
            text=draft.text,
            generated_at=draft.generated_at,
            token_count=token_count(draft.text),
            source_ids=[str(i) for i in draft.source_ids],
            generator=draft.generator,
            edited_by="",
        )
        saved.append(draft.part)
    if saved:
        _save(row, columns)
    return saved


def _sources_gone(end_user: EndUser, source_ids: Sequence[Any]) -> bool:
    """Whether a memory the draft was made of no longer exists (erased)."""
    wanted = {str(source) for source in source_ids}
    if not wanted:
        return False
    held = Memory.objects.filter(project_id=end_user.project_id, public_id__in=list(wanted))
    return held.count() < len(wanted)


def _checked_part(part: str) -> None:
    if part not in PARTS:
        raise SynopsisError({"part": [f"Must be one of: {', '.join(PARTS)}."]})


def _snapshot(part: SynopsisPart) -> dict[str, Any]:
    return {
        "text": part.text,
        "locked": part.locked,
        "generator": part.generator,
        "generated_at": part.generated_at.isoformat() if part.generated_at else None,
    }


def _record(row: Synopsis, part: str, action: str, actor: Actor, before: SynopsisPart) -> None:
    SynopsisRevision.objects.create(
        project_id=row.project_id,
        end_user_id=row.end_user_id,
        part=part,
        action=action,
        actor_type=actor.type,
        actor=actor.name,
        before=_snapshot(before),
        after=_snapshot(row.part(part)),
    )


@transaction.atomic
def synopsis_part_edit(
    *, end_user: EndUser, part: str, text: str, actor: Actor, lock: bool = True
) -> Synopsis:
    """Write a part by hand (generator "operator"), locked against regeneration unless
    ``lock`` is False; recorded as a SynopsisRevision. SynopsisError if the text is
    longer than the project's ``synopsis.max_tokens``."""
    _checked_part(part)
    config = project_settings_get(project=end_user.project).synopsis
    text = text.strip()
    tokens = token_count(text)
    if len(text) > MAX_TEXT_CHARS or tokens > config.max_tokens:
        message = f"At most {config.max_tokens} tokens (synopsis.max_tokens); this is {tokens}."
        raise SynopsisError({f"{part}.text": [message]})
    row = _row_locked(end_user)
    before = row.part(part)
    columns = row.part_set(
        part,
        text=text,
        generated_at=timezone.now(),
        token_count=tokens,
        source_ids=[],
        generator=OPERATOR,
        locked=lock,
        edited_by=f"{actor.type}:{actor.name}",
    )
    _save(row, columns)
    _record(row, part, SynopsisRevision.Action.EDIT, actor, before)
    return row


@transaction.atomic
def synopsis_part_lock(*, end_user: EndUser, part: str, locked: bool, actor: Actor) -> Synopsis:
    """Lock a part against regeneration, or unlock it (it is regenerated again once
    stale); recorded when it changes anything."""
    _checked_part(part)
    row = _row_locked(end_user)
    before = row.part(part)
    if before.locked != locked:
        columns = row.part_set(part, locked=locked, edited_by=f"{actor.type}:{actor.name}")
        _save(row, columns)
        action = SynopsisRevision.Action.LOCK if locked else SynopsisRevision.Action.UNLOCK
        _record(row, part, action, actor, before)
    return row


# --- regeneration ----------------------------------------------------------------------


def synopsis_refresh_request(
    *, end_user: EndUser, parts: Sequence[str] = PARTS, force: bool = False
) -> list[str]:
    """Ask a worker to regenerate ``parts`` of the user's synopsis (the generator skips
    locked parts, and without ``force`` fresh ones); returns the parts asked for now
    (a part already queued is not asked for again, unless ``force``). Raises
    SynopsisUnavailable if Redis or the broker cannot be reached."""
    for part in parts:
        _checked_part(part)
    return synopsis_refresh_queue(end_user=end_user, parts=list(parts), force=force)
