"""User synopses generated: the identity part from the user's facts, the context part
from their open goals, the newest summaries of their rooms and their last messages
(synopsis/services/synopsis_material.py).

* With an LLM configured, one chat call per part over that material, its answer cut
  to ``synopsis.max_tokens``; a permanent LLM error falls back to the template (the
  part's generator says so), a retryable one propagates (the task retries later).
* Without one, a template (synopsis/synopsis_writers.py) that keeps what fits in
  ``synopsis.max_tokens``, by priority.

The parts are stored through memories.services.synopsis (locked parts are skipped
there too), with the ids of the memories they were made from.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import IntegrityError
from django.utils import timezone

from memories.config import SynopsisSettings
from memories.models import EndUser, Memory, Synopsis
from memories.models.synopsis import IDENTITY, PARTS
from memories.providers.task_sending import task_send
from memories.services.concurrency import references_gone
from memories.services.configuration import project_settings_get
from memories.services.synopsis import (
    FRESH,
    SynopsisDraft,
    synopsis_part_freshness,
    synopsis_refresh_request,
    synopsis_store,
    synopsis_ttl_seconds,
)
from synopsis.llm import LlmError, llm_choice
from synopsis.services.summaries import DERIVED_QUEUE
from synopsis.services.synopsis_material import IDENTITY_KINDS, part_material
from synopsis.synopsis_writers import part_by_llm, part_by_template

logger = logging.getLogger(__name__)

SYNOPSIS_GENERATE_TASK = "synopsis.tasks.synopsis_generate_task"
TEMPLATE = "template"


def synopsis_generate(
    *, end_user_id: int, parts: Sequence[str] = PARTS, force: bool = False
) -> list[str]:
    """Regenerate the user's ``parts`` that are due (missing, stale, or for the identity
    part ``synopsis.refresh_after_facts`` new facts), or all of them with ``force``;
    locked parts never. Returns the parts stored. A retryable LlmError propagates."""
    user = EndUser.objects.select_related("project").filter(pk=end_user_id).first()
    if user is None:
        return []
    config = project_settings_get(project=user.project).synopsis
    row = Synopsis.objects.filter(end_user=user).first()
    todo = [part for part in PARTS if part in parts and _due(user, row, part, config, force)]
    if not todo:
        return []
    drafts = [_draft(user, part, config) for part in todo]
    try:
        stored = synopsis_store(end_user=user, drafts=drafts)
    except IntegrityError as error:
        if not references_gone(error):
            raise
        logger.info("user %s was deleted while their synopsis was made; dropped", end_user_id)
        return []
    logger.info("synopsis of user %s: %s regenerated", end_user_id, ", ".join(stored) or "none")
    return stored


def _due(
    user: EndUser, row: Synopsis | None, part: str, config: SynopsisSettings, force: bool
) -> bool:
    current = row.part(part) if row is not None else None
    if current is not None and current.locked:
        return False
    if force:
        return True
    ttl = synopsis_ttl_seconds(config=config, part=part)
    if synopsis_part_freshness(part=current, ttl_seconds=ttl, now=timezone.now()) != FRESH:
        return True
    return part == IDENTITY and _facts_due(user, current.generated_at if current else None, config)


def _facts_due(user: EndUser, since: datetime | None, config: SynopsisSettings) -> bool:
    """Whether ``refresh_after_facts`` facts about the user arrived since ``since``."""
    if config.refresh_after_facts == 0:
        return False
    facts = (
        Memory.objects.filter(project_id=user.project_id, end_user=user)
        .of_kind(*IDENTITY_KINDS)
        # a proposal (the review inbox) or a forgotten fact says nothing new about her
        .exclude(status__in=[Memory.Status.PROPOSED, Memory.Status.TRASHED])
    )
    if since is not None:
        facts = facts.filter(created_at__gt=since)
    return facts[: config.refresh_after_facts].count() >= config.refresh_after_facts


def synopsis_facts_refresh(*, project_id: int, memory_ids: list[Any]) -> int:
    """Ask for the identity part of each user who got facts among ``memory_ids`` and now
    has ``synopsis.refresh_after_facts`` new ones since it was generated; returns how
    many users were asked for."""
    users = EndUser.objects.select_related("project").filter(
        project_id=project_id,
        pk__in=Memory.objects.filter(pk__in=memory_ids, kind__in=IDENTITY_KINDS).values(
            "end_user_id"
        ),
    )
    asked = 0
    for user in users:
        config = project_settings_get(project=user.project).synopsis
        row = Synopsis.objects.filter(end_user=user).first()
        if row is not None and row.identity_locked:
            continue
        if _facts_due(user, row.identity_generated_at if row else None, config):
            synopsis_refresh_request(end_user=user, parts=[IDENTITY])
            asked += 1
    return asked


def synopsis_generate_enqueue(*, end_user_id: int, parts: Sequence[str], force: bool) -> None:
    """Send the generation task of the user's ``parts`` to the derived queue;
    TaskNotSent when the broker does not take it."""
    task_send(
        SYNOPSIS_GENERATE_TASK,
        args=[end_user_id, list(parts)],
        kwargs={"force": force},
        queue=DERIVED_QUEUE,
    )


def _draft(user: EndUser, part: str, config: SynopsisSettings) -> SynopsisDraft:
    """The part by the LLM if one is configured and there is material, else by template."""
    generated_at = timezone.now()  # before the material is read: later facts count as new
    material = part_material(user=user, part=part, max_tokens=config.max_tokens)
    provider, offline_reason = llm_choice(project_id=user.project_id)
    generator = f"{TEMPLATE}; {offline_reason}" if offline_reason else TEMPLATE
    if provider is not None and any(material.sections):
        try:
            text, ids = part_by_llm(provider=provider, material=material)
            return SynopsisDraft(part, text, provider.name, material.name_ids + ids, generated_at)
        except LlmError as error:
            if error.retryable:
                raise
            logger.warning("%s failed for good (%s); synopsis by template", provider.name, error)
            generator = f"{TEMPLATE}; {provider.name} failed: {error.kind}"
    text, ids = part_by_template(material)
    name_ids = material.name_ids if text else []
    return SynopsisDraft(part, text, generator, name_ids + ids, generated_at)
