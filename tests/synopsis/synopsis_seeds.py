"""The user synopsis tests' material: Maria's facts, goals, summaries and turns, the
synopsis they give by template, and helpers to configure, age and inspect it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import redis
from django.conf import settings

from memories.models import EndUser, Memory, Synopsis
from memories.services.configuration import project_settings_update
from memories.services.memories import MemoryInput, memory_create_batch
from memories.services.revisions import Actor
from memories.services.synopsis_cache import CACHE_KEY

ADMIN = Actor.operator("admin")
DAY = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
IDENTITY = (
    "Maria is 34 years old, lives in Porto and works at Acme Corp. Maria likes jazz and "
    "loves hiking. Maria is allergic to peanuts. Maria has a dog named Rex. Maria's sister "
    "is Ana."
)
CONTEXT = (
    "Open goals: Maria wants to run a marathon (due 2027-06-30); Maria wants to learn "
    "Portuguese.\n"
    "Recently (2026-01-10): Maria planned a trip to Lisbon with the assistant.\n"
    'Latest messages from Maria: "Can you find me a hotel in Lisbon?" (2026-01-11); '
    '"I prefer somewhere near the river." (2026-01-12)'
)


def write(tenant, *items):
    return [
        memory
        for memory, _ in memory_create_batch(
            project=tenant.project, items=list(items), actor=Actor.system("test")
        )
    ]


def fact(content, category, *, confidence=0.7, slot=None, at=DAY, user="maria", **json_):
    return MemoryInput(
        content=content,
        kind="fact",
        user=user,
        confidence=confidence,
        created_at=at,
        content_json={"category": category, **({"slot": slot} if slot else {}), **json_},
    )


def relation(content, predicate, obj, *, at=DAY):
    return MemoryInput(
        content=content,
        kind="relationship",
        user="maria",
        created_at=at,
        content_json={"subject": "User", "predicate": predicate, "object": obj},
    )


def seed_facts(tenant):
    """Maria's facts, one superseded, plus another user's."""
    memories = write(
        tenant,
        fact("User's name is Maria.", "identity", confidence=0.8, slot="identity.name"),
        fact("User lives in Porto.", "location", slot="location.home"),
        fact("User works at Acme Corp.", "work", slot="work.employer"),
        fact("User loves hiking.", "preference", confidence=0.6),
        fact("User likes jazz.", "preference"),
        fact("User is allergic to peanuts.", "health", confidence=0.8),
        fact("User is 34 years old.", "identity", slot="identity.age"),
        relation("User's sister is Ana.", "sister", "Ana", at=DAY - timedelta(days=1)),
        relation("User has a dog named Rex.", "has_pet", "Rex"),
        fact("User lives in Lisbon.", "location", slot="location.home"),
        fact("User lives in Berlin.", "location", user="bob"),
    )
    Memory.objects.filter(content="User lives in Lisbon.").update(status="superseded")
    forget_queued()  # the write's receiver asked for the identity part: ten new facts
    return {m.content: m for m in memories}


def forget_queued():
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete("derived", *client.scan_iter(match="memoryhub:synopsis-queued:*"))


def goal(content, *, at, **json_):
    return MemoryInput(
        content=content, kind="goal", user="maria", content_json=json_, created_at=at
    )


def summary(content, *, at):
    return MemoryInput(content=content, kind="summary", user="maria", room="trip", created_at=at)


def turn(content, role, *, at):
    return MemoryInput(content=content, user="maria", room="trip", role=role, created_at=at)


def seed_context(tenant):
    """Maria's goals (one done), the trip room's summaries (one superseded) and turns."""
    memories = write(
        tenant,
        goal("User wants to learn Portuguese.", at=DAY),
        goal("User wants to run a marathon.", at=DAY - timedelta(days=9), due="2027-06-30"),
        goal("User wants to quit smoking.", at=DAY, status="done"),
        summary("Maria asked about flights.", at=DAY - timedelta(days=2)),
        summary("Maria planned a trip to Lisbon with the assistant.", at=DAY),
        turn("Can you find me a hotel in Lisbon?", "user", at=DAY + timedelta(days=1)),
        turn("Here are three hotels.", "assistant", at=DAY + timedelta(days=1, minutes=1)),
        turn("I prefer somewhere near the river.", "user", at=DAY + timedelta(days=2)),
    )
    Memory.objects.filter(content="Maria asked about flights.").update(status="superseded")
    forget_queued()
    return {m.content: m for m in memories}


def configure(tenant, **synopsis_settings):
    project_settings_update(
        project=tenant.project, changes={"synopsis": synopsis_settings}, actor=ADMIN
    )


def maria(tenant):
    return EndUser.objects.select_related("project").get(
        project=tenant.project, external_id="maria"
    )


def queued_tasks(redis_client):
    """The (task name, args) waiting on the derived queue, oldest first."""
    found = []
    for raw in reversed(redis_client.lrange("derived", 0, -1)):
        headers = json.loads(raw)["headers"]
        found.append((headers["task"], headers["argsrepr"]))
    return found


def age(user, part, **delta):
    """Make the part older than it is by ``delta`` (and the cache forget it: it holds
    the part's generated_at, which time passing does not change)."""
    column = f"{part}_generated_at"
    row = Synopsis.objects.get(end_user=user)
    Synopsis.objects.filter(pk=row.pk).update(**{column: getattr(row, column) - timedelta(**delta)})
    redis.Redis.from_url(settings.REDIS_URL).delete(CACHE_KEY.format(user.pk))
