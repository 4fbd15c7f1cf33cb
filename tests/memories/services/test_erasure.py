"""Erasure: after a user's, a memory's or the pruning purge's delete, a marker written
into every kind of thing the hub keeps about them is found in no column of any table
and in no Redis key or value; the audit keeps who, when, what and a SHA-256."""

from __future__ import annotations

import hashlib
import importlib
import uuid
from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from memories.models import (
    EndUser,
    Memory,
    MemoryRevision,
    ParkedTask,
    Room,
    Synopsis,
)
from memories.services.configuration import project_settings_update
from memories.services.memories import MemoryInput, memories_status_change, memory_create_batch
from memories.services.parking import Parking, task_park
from memories.services.pruning import prune_run, pruned_purge, pruning_due
from memories.services.revisions import Actor
from memories.services.synopsis import synopsis_get, synopsis_part_edit
from memories.services.working import working_add, working_list
from synopsis.services.summaries import room_summarize
from synopsis.services.synopses import synopsis_generate
from tests.ingestion.conftest import ingest_now, upload

pytestmark = pytest.mark.django_db(transaction=True)

SMALL = {"max_size": 2, "buffer_multiplier": 2, "summary_batch_size": 2}
TEST = Actor.system("test")


def marker() -> str:
    return f"zqxmark{uuid.uuid4().hex[:12]}"


def hits_in_database(text: str) -> list[str]:
    """Every table whose rows, cast to text (bytea decoded), hold ``text``."""
    found = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
        )
        tables = [row[0] for row in cursor.fetchall()]
        for table in tables:
            cursor.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = 'public' AND table_name = %s AND data_type = 'bytea'",
                [table],
            )
            blobs = [row[0] for row in cursor.fetchall()]
            decoded = "".join(f" || encode(coalesce(\"{c}\", ''), 'escape')" for c in blobs)
            cursor.execute(
                f'SELECT count(*) FROM "{table}" AS t WHERE (t::text{decoded}) ILIKE %s',
                [f"%{text}%"],
            )
            if cursor.fetchone()[0]:
                found.append(table)
    return found


def hits_in_redis(redis_client, text: str) -> list[str]:
    """Every Redis key whose name or value holds ``text``."""
    needle, found = text.encode(), []
    for key in redis_client.scan_iter(count=1000):
        kind = redis_client.type(key)
        if kind == b"string":
            values = [redis_client.get(key) or b""]
        elif kind == b"hash":
            values = [*redis_client.hgetall(key).keys(), *redis_client.hgetall(key).values()]
        elif kind == b"list":
            values = redis_client.lrange(key, 0, -1)
        elif kind == b"set":
            values = list(redis_client.smembers(key))
        elif kind == b"zset":
            values = redis_client.zrange(key, 0, -1)
        else:
            values = []
        if needle in key or any(needle in value for value in values):
            found.append(key.decode())
    return found


def small_room(tenant, name):
    tenant.client.post("/api/v1/rooms/", {"external_id": name})
    response = tenant.client.patch(
        f"/api/v1/rooms/{name}/", {"settings": {"buffer": SMALL}}, format="json"
    )
    assert response.status_code == 200, response.json()
    return Room.objects.get(project=tenant.project, external_id=name)


def turns(tenant, mark, *, user="maria", room="r1", count=6, key=None):
    """``count`` turns of ``user`` in ``room``, each saying ``mark``; their public ids."""
    start = timezone.now() - timedelta(days=1)
    items = [
        {
            "room": room,
            "user": user,
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Turn {i}: my code word is {mark} and we spoke of topic {i}.",
            "metadata": {"note": f"{mark} {i}"},
            "created_at": (start + timedelta(minutes=i)).isoformat(),
        }
        for i in range(count)
    ]
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    response = tenant.client.post(
        "/api/v1/memories/batch/", {"memories": items}, format="json", **headers
    )
    assert response.status_code == 201, response.json()
    return [result["memory"]["id"] for result in response.json()["results"]]


def derived_fact(tenant, text, sources, *, user="maria", evidence=""):
    [(fact, _)] = memory_create_batch(
        project=tenant.project,
        items=[
            MemoryInput(
                content=text,
                kind="fact",
                user=user,
                confidence=0.8,
                content_json={"category": "preference"},
                source_ids=list(sources),
                metadata={"evidence": evidence, "extracted_from": sources[0]},
            )
        ],
        actor=Actor.system("fact_extract"),
    )
    return fact


def remembered(tenant, mark, redis_client):
    """Maria's memories, revisions, facts, a summary, a synopsis (cached, edited), working
    notes, a document, a replayable response, a parked task and an admin log line, all
    saying ``mark``."""
    room = small_room(tenant, "r1")
    ids = turns(tenant, mark, key=f"batch-{mark}")
    first = ids[0]
    tenant.client.patch(
        f"/api/v1/memories/{first}/", {"content": f"edited: {mark} still"}, format="json"
    )
    derived_fact(tenant, f"User's code word is {mark}.", [first])
    assert room_summarize(room_id=room.pk)  # the oldest turns, quoted extractively
    maria = EndUser.objects.get(project=tenant.project, external_id="maria")
    synopsis_generate(end_user_id=maria.pk, force=True)
    synopsis_get(end_user=maria)  # cached in Redis
    synopsis_part_edit(
        end_user=maria, part="context", text=f"Operator note: {mark}.", actor=Actor.operator("o")
    )
    working_add(room=room, content=f"scratch: {mark}", metadata={"m": mark})
    document = upload(tenant.client, f"{mark}.txt", f"A page about {mark}.".encode(), user="maria")
    assert document.status_code in (201, 202), document.json()
    ingest_now(document.json()["id"])
    task_park(
        parking=Parking(
            task="synopsis.tasks.fact_extract_task",
            input_kind="memories",
            input_ids=[first],
            input_key=first,
            reason=ParkedTask.Reason.FAILED,
            error=f"could not parse {mark}",
            project_id=tenant.project.pk,
        )
    )
    staff = get_user_model().objects.create_user("curator", password="x")
    memory = Memory.objects.get(pk=first)
    LogEntry.objects.log_actions(
        staff.pk, [memory], CHANGE, change_message="[]", single_object=True
    )
    return room, ids


def test_a_forgotten_user_leaves_no_word_anywhere(owner, redis_client):
    mark = marker()
    room, ids = remembered(owner, mark, redis_client)
    assert set(hits_in_database(mark)) >= {
        "memories_memory",
        "memories_memoryrevision",
        "memories_synopsis",
        "memories_synopsisrevision",
        "memories_idempotencykey",
        "memories_parkedtask",
        "django_admin_log",
        "ingestion_document",
        "ingestion_documentcontent",
    }
    assert hits_in_redis(redis_client, mark)  # the cached synopsis, the working note
    assert Memory.objects.filter(kind="summary", content__contains=mark).exists()
    revisions = MemoryRevision.objects.filter(memory_public_id__in=ids).count()

    response = owner.client.delete("/api/v1/users/maria/")

    assert response.status_code == 200, response.json()
    receipt = response.json()["erased"]
    assert hits_in_database(mark) == []
    assert hits_in_redis(redis_client, mark) == []
    assert response.json()["deleted"] == receipt["memories"] > len(ids)
    assert receipt["users"] == receipt["documents"] == receipt["synopses"] == 1
    assert receipt["revisions_redacted"] >= revisions
    assert receipt["idempotency_keys"] == receipt["parked_tasks"] == 1
    assert receipt["admin_log_entries"] == 1
    assert receipt["working_memory_rooms"] == 1
    assert working_list(room=room).items == []
    # the audit: who, when, what, and the text's hash, for every erased memory
    deleted = MemoryRevision.objects.filter(memory_public_id__in=ids, action="delete")
    assert deleted.count() == len(ids)
    for revision in deleted:
        assert revision.before["redacted"] is True
        assert revision.after == {"erased": "user delete"}
        assert revision.actor_type == "api_key" and revision.actor == owner.key.prefix
    update = MemoryRevision.objects.get(memory_public_id=ids[0], action="update")
    edited = f"edited: {mark} still"
    assert update.after["content_sha256"] == hashlib.sha256(edited.encode()).hexdigest()
    assert "content" not in update.before and "metadata" not in update.after


def test_a_deleted_memory_takes_what_derives_from_it_alone(owner, redis_client):
    mark, other = marker(), marker()
    room = small_room(owner, "r1")
    [target] = turns(owner, mark, count=1, key=f"one-{mark}")
    calm = turns(owner, other, count=5, room="r1")
    alone = derived_fact(owner, f"User's code word is {mark}.", [target])
    shared = derived_fact(
        owner, "User likes topic talks.", [target, calm[1]], evidence=f"I said {mark}."
    )
    assert room_summarize(room_id=room.pk)  # the first two turns: the target and calm[0]
    summary = Memory.objects.get(kind="summary", room=room)
    assert summary.source_ids == [target, calm[0]]
    maria = EndUser.objects.get(project=owner.project, external_id="maria")
    synopsis_generate(end_user_id=maria.pk, force=True)
    synopsis_get(end_user=maria)
    assert mark in Synopsis.objects.get(end_user=maria).identity_text
    assert mark in summary.content

    response = owner.client.delete(f"/api/v1/memories/{target}/")

    assert response.status_code == 204
    assert hits_in_database(mark) == []
    assert hits_in_redis(redis_client, mark) == []
    assert not Memory.objects.filter(pk__in=[alone.pk, summary.pk]).exists()
    shared.refresh_from_db()
    assert shared.source_ids == [calm[1]]  # kept: another message says it too
    assert shared.metadata == {"extracted_from": calm[1]}  # its evidence sentence went
    gone = MemoryRevision.objects.get(memory_public_id=alone.pk, action="delete")
    assert gone.after == {"erased": "delete", "derived": True}  # not a retraction
    assert response.status_code == 204
    # the summary's other turn is back in the buffer, to be summarized anew
    assert Memory.objects.get(pk=calm[0]).status == "active"
    assert Synopsis.objects.get(end_user=maria).identity_text == ""
    assert MemoryRevision.objects.filter(memory_public_id=alone.pk, action="delete").exists()


def test_the_pruning_purge_leaves_no_word(owner, redis_client):
    mark = marker()
    ids = turns(owner, mark, count=2, room="r2", key=f"prune-{mark}")
    with transaction.atomic():
        memories = list(Memory.objects.filter(pk__in=ids).select_for_update())
        memories_status_change(memories=memories, status="pruned", action="prune", actor=TEST)
    assert "memories_memoryrevision" in hits_in_database(mark)

    assert pruned_purge(project=owner.project, actor=TEST, retention_days=0) == 2

    assert hits_in_database(mark) == []
    actions = set(
        MemoryRevision.objects.filter(memory_public_id__in=ids).values_list("action", flat=True)
    )
    assert actions == {"create", "prune", "delete"}


def test_an_erased_memory_of_another_project_is_never_touched(owner, outsider):
    mark = marker()
    mine = turns(owner, mark, count=2, room="r3")
    theirs = turns(outsider, mark, count=2, room="r3")
    derived_fact(outsider, f"User's code word is {mark}.", [theirs[0]])

    assert owner.client.delete("/api/v1/users/maria/").status_code == 200

    assert not Memory.objects.filter(pk__in=mine).exists()
    assert Memory.objects.filter(project=outsider.project).count() == 3
    kept = MemoryRevision.objects.filter(project=outsider.project, action="create")
    assert kept.count() == 3 and all(mark in str(revision.after) for revision in kept)
    assert not MemoryRevision.objects.filter(project=outsider.project, action="delete").exists()


def test_revisions_are_kept_for_ever_unless_a_retention_is_set(owner):
    old, new = turns(owner, marker(), count=2, room="r4")
    MemoryRevision.objects.filter(memory_public_id=old).update(
        created_at=timezone.now() - timedelta(days=3)
    )
    run = prune_run(project=owner.project, actor=TEST, purge=True)
    assert "revisions_purged" not in run.counts  # kept for ever: nothing to count
    assert MemoryRevision.objects.filter(memory_public_id=old).exists()  # default: kept

    project_settings_update(
        project=owner.project, changes={"pruning": {"revision_retention_days": 2}}, actor=TEST
    )
    assert pruning_due(project=owner.project)
    run = prune_run(project=owner.project, actor=TEST, purge=True)

    assert run.counts["revisions_purged"] == 1
    assert not MemoryRevision.objects.filter(memory_public_id=old).exists()
    assert MemoryRevision.objects.filter(memory_public_id=new).exists()
    assert not pruning_due(project=owner.project)


def test_the_migration_erases_what_was_deleted_before_erasure_existed(owner):
    """Revisions of memories deleted by earlier versions kept their words: 0020 redacts
    them (frozen SQL), and leaves a live memory's history alone."""
    migration = importlib.import_module("memories.migrations.0020_erase_deleted_revisions")
    [live] = turns(owner, "kept words", count=1, room="r5")
    gone = uuid.uuid4()
    MemoryRevision.objects.create(
        project=owner.project,
        memory_id=gone,
        memory_public_id=gone,
        action="delete",
        actor_type="api_key",
        actor="old",
        before={"content": "Old words", "kind": "message", "metadata": {"a": "Old words"}},
        after=None,
    )
    with connection.cursor() as cursor:
        cursor.execute(migration.ERASE_SQL)

    erased = MemoryRevision.objects.get(memory_id=gone)
    assert erased.before == {
        "redacted": True,
        "kind": "message",
        "content_sha256": hashlib.sha256(b"Old words").hexdigest(),
        "words_sha256": hashlib.sha256(b"old words").hexdigest(),
    }
    assert "kept words" in str(MemoryRevision.objects.get(memory_public_id=live).after)
