"""Overflow summaries: a room over capacity has its oldest messages condensed into a
chain of summaries and archived, never deleted, by a real worker and concurrently."""

from __future__ import annotations

import threading
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from memories.models import Memory, MemoryRevision, Room
from synopsis.llm import LlmError
from synopsis.services.summaries import room_summarize
from tests.conftest import wait_until

# capacity 4 unsummarized messages, summarized two at a time
SMALL = {"max_size": 2, "buffer_multiplier": 2, "summary_batch_size": 2}
START = timezone.now() - timedelta(days=2)


def small_room(tenant, name="r1", **overrides):
    tenant.client.post("/api/v1/rooms/", {"external_id": name})
    response = tenant.client.patch(
        f"/api/v1/rooms/{name}/", {"settings": {"buffer": {**SMALL, **overrides}}}, format="json"
    )
    assert response.status_code == 200, response.json()
    return Room.objects.get(project=tenant.project, external_id=name)


def append(tenant, count, *, room="r1", start=0):
    """``count`` turns, alternating user and assistant, a minute apart; their ids."""
    items = [
        {
            "room": room,
            "user": "maria",
            "role": "user" if (start + i) % 2 == 0 else "assistant",
            "content": f"Turn {start + i}: we talked about topic number {start + i} today.",
            "created_at": (START + timedelta(minutes=start + i)).isoformat(),
        }
        for i in range(count)
    ]
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": items}, format="json")
    assert response.status_code == 201, response.json()
    return [result["memory"]["id"] for result in response.json()["results"]]


def summaries_of(room):
    return list(Memory.objects.filter(room=room, kind="summary").order_by("created_at", "id"))


def check_the_chain(room, message_ids, *, capacity=4, batch=2):
    """What a room driven past its capacity must look like once it is summarized."""
    messages = Memory.objects.filter(room=room, kind="message")
    assert messages.count() == len(message_ids)  # every original is still there
    active = list(messages.filter(status="active").order_by("created_at"))
    assert [str(m.pk) for m in active] == message_ids[-capacity:]
    summaries = summaries_of(room)
    assert len(summaries) == (len(message_ids) - capacity) // batch
    for i, summary in enumerate(summaries):
        # each summary condenses exactly its batch, in order, and those are archived
        assert summary.source_ids == message_ids[i * batch : (i + 1) * batch]
        archived = Memory.objects.filter(pk__in=summary.source_ids, status="archived")
        assert archived.count() == batch
        previous = summaries[i - 1] if i else None
        assert summary.metadata["previous_summary_id"] == (str(previous.pk) if previous else None)
        assert summary.metadata["messages_covered"] == (i + 1) * batch
        assert summary.metadata["summarizer"]
        assert summary.content.strip()
        # the newest is active; each earlier one is superseded by the one folding it in
        assert summary.status == ("active" if i == len(summaries) - 1 else "superseded")
    archive_revisions = MemoryRevision.objects.filter(action="archive", memory_id__in=message_ids)
    assert archive_revisions.count() == len(summaries) * batch
    return summaries


def test_a_room_over_capacity_is_summarized_batch_by_batch(owner):
    room = small_room(owner)
    ids = append(owner, 12)
    written = room_summarize(room_id=room.pk)
    assert len(written) == 4
    summaries = check_the_chain(room, ids)
    body = owner.client.get("/api/v1/rooms/r1/buffer/").json()
    assert body["summary"]["id"] == str(summaries[-1].pk)
    assert [m["id"] for m in body["messages"]] == ids[-2:]
    assert body["unsummarized"] == 4
    # archived messages stay listable and searchable with their status
    listed = owner.client.get("/api/v1/memories/", {"room": "r1", "status": "archived"}).json()
    assert listed["count"] == 8
    found = owner.client.post(
        "/api/v1/search/",
        {"query": "topic number 3", "mode": "keyword", "status": ["archived"], "room": "r1"},
        format="json",
    ).json()["results"]
    assert str(found[0]["memory"]["id"]) == ids[3]


def test_a_summary_keeps_who_said_what_and_when(owner):
    room = small_room(owner)
    append(owner, 6)
    [summary] = room_summarize(room_id=room.pk)
    assert "maria (user)" in summary.metadata["participants"]
    assert "assistant" in summary.metadata["participants"]
    assert summary.metadata["first_message_at"] < summary.metadata["last_message_at"]
    assert "Turn 0" in summary.content or "topic number 0" in summary.content
    assert summary.end_user.external_id == "maria"


def test_a_room_within_capacity_or_with_summaries_off_is_left_alone(owner):
    room = small_room(owner)
    append(owner, 4)
    assert room_summarize(room_id=room.pk) == []
    off = small_room(owner, "r2", summarize=False)
    append(owner, 9, room="r2")
    assert room_summarize(room_id=off.pk) == []
    assert not Memory.objects.filter(kind="summary").exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_sweeps_never_summarize_the_same_messages_twice(owner):
    room = small_room(owner)
    ids = append(owner, 20)
    errors = []

    def sweep():
        try:
            room_summarize(room_id=room.pk)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    room_summarize(room_id=room.pk)  # whatever a skipped sweep left
    check_the_chain(room, ids)
    sources = [i for s in summaries_of(room) for i in s.source_ids]
    assert len(sources) == len(set(sources)) == 16


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_drives_a_room_through_three_times_its_capacity(owner, celery_worker_process):
    room = small_room(owner)
    ids = []
    for start in range(0, 12, 3):  # an agent appending turn by turn, a few at a time
        ids += append(owner, 3, start=start)
    wait_until(lambda: len(summaries_of(room)) == 4, timeout=90)
    wait_until(
        lambda: not Memory.objects.filter(room=room, embedding_status="pending").exists(),
        timeout=60,
    )
    check_the_chain(room, ids)


def test_the_command_summarizes_the_rooms_over_capacity(owner, outsider):
    room = small_room(owner)
    append(owner, 8)
    other = small_room(outsider)
    append(outsider, 8)
    out = StringIO()
    call_command("summarize_rooms", "--project", "owner", stdout=out)
    assert "Wrote 2 summaries in 1 rooms." in out.getvalue()
    assert len(summaries_of(room)) == 2
    assert summaries_of(other) == []  # another project's room: not asked for


def test_with_an_llm_the_summary_is_its_answer_with_the_usage(owner, llm_server, llm_settings):
    room = small_room(owner)
    append(owner, 6)
    llm_server.ok("Maria and the assistant discussed topics 0 and 1.", prompt_tokens=80)
    [summary] = room_summarize(room_id=room.pk)
    assert summary.content == "Maria and the assistant discussed topics 0 and 1."
    assert summary.metadata["summarizer"] == "llm:stub-model"
    assert summary.metadata["usage"]["prompt_tokens"] == 80
    assert "Turn 0" in llm_server.requests[0].prompt


def test_an_llm_refusal_falls_back_to_the_extractive_summary(owner, llm_server, llm_settings):
    room = small_room(owner)
    append(owner, 6)
    llm_server.refusal()
    [summary] = room_summarize(room_id=room.pk)
    assert summary.metadata["summarizer"] == "extractive"
    assert "refusal" in summary.metadata["fallback_reason"]


def test_an_llm_that_stays_down_leaves_the_room_as_it_was(owner, llm_server, llm_settings):
    room = small_room(owner)
    ids = append(owner, 6)
    for _ in range(3):
        llm_server.status(503)
    with pytest.raises(LlmError) as raised:
        room_summarize(room_id=room.pk)
    assert raised.value.retryable
    assert not Memory.objects.filter(kind="summary").exists()
    assert Memory.objects.filter(pk__in=ids, status="active").count() == 6
