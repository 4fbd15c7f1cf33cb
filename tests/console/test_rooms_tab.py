"""A user's Rooms tab and a room's view: counts that agree (the list and the view count
the same messages), the buffer window with its capacity and unsummarized turns (and
its poll while a summary is due), the summaries chain with the turns each covers, the
room's own settings (effective, overridden, edited and reset through the API's
service; bad values in place), its working memory (TTLs, delete), the messages'
pages and a fact's source turn found on its page; viewers, other projects, rooms."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memories.models import EndUser, Membership, Memory, Room, SettingsRevision
from memories.services.working import working_add, working_list
from synopsis.services.summaries import room_summarize
from tests.console.operators import operator_client

HTMX = {"HTTP_HX_REQUEST": "true"}
START = timezone.now() - timedelta(days=2)
# capacity 4 unsummarized messages, summarized two at a time
SMALL = {"max_size": 2, "buffer_multiplier": 2, "summary_batch_size": 2}


def append(tenant, count, *, room="r1", user="maria", start=0):
    items = [
        {
            "room": room,
            "user": user,
            "role": "user" if (start + i) % 2 == 0 else "assistant",
            "content": f"Turn {start + i}: we talked about topic number {start + i} today.",
            "created_at": (START + timedelta(minutes=start + i)).isoformat(),
        }
        for i in range(count)
    ]
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": items}, format="json")
    assert response.status_code == 201, response.json()
    return [result["memory"]["id"] for result in response.json()["results"]]


@pytest.fixture
def room(owner):
    """Room r1 (capacity 4) with 10 of Maria's turns and 2 of Bob's, summarized: 4
    summaries (3 superseded) of 2 turns each, 8 turns archived, 4 in the buffer; a fact
    of Maria's in the room (a memory of hers that is no message)."""
    owner.client.post("/api/v1/rooms/", {"external_id": "r1"})
    response = owner.client.patch(
        "/api/v1/rooms/r1/", {"settings": {"buffer": SMALL}}, format="json"
    )
    assert response.status_code == 200, response.json()
    append(owner, 10)
    append(owner, 2, user="bob", start=10)
    r1 = Room.objects.get(project=owner.project, external_id="r1")
    assert len(room_summarize(room_id=r1.pk)) == 4
    owner.client.post(
        "/api/v1/memories/", {"user": "maria", "room": "r1", "kind": "fact", "content": "A fact"}
    )
    return r1


@pytest.fixture
def maria(owner, room):
    return EndUser.objects.get(project=owner.project, external_id="maria")


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project)


def url(name, owner, user, *rest):
    return reverse(name, args=[owner.project.pk, user.pk, *rest])


def test_the_list_and_the_view_count_the_same_messages(owner, editor, room, maria):
    messages = Memory.objects.filter(room=room, kind="message").count()
    assert messages == 12  # hers and Bob's, summarized or not; not the fact, not summaries
    html = editor.get(url("console-user-rooms", owner, maria)).content.decode()
    assert 'aria-current="page">Rooms</a>' in html
    view_url = url("console-user-room-view", owner, maria, room.pk)
    assert f'<a href="{view_url}">r1</a>' in html
    assert f'<td class="num room-messages">{messages}</td>' in html
    assert '<td class="num">4</td>' in html  # unsummarized
    view = editor.get(view_url).content.decode()
    assert f'<strong class="room-messages">{messages}</strong> messages' in view
    assert f"{messages} messages, oldest first" in view


def test_the_buffer_window_capacity_and_unsummarized(owner, editor, room, maria):
    html = editor.get(url("console-user-room-view", owner, maria, room.pk)).content.decode()
    assert '<strong class="buffer-window-count">2</strong> turns in the window' in html
    assert '<strong class="buffer-unsummarized">4</strong> unsummarized of a capacity of' in html
    assert "<strong>4</strong>" in html
    assert 'hx-trigger="every 2s"' not in html  # nothing due: no polling
    append(owner, 3, start=20)  # 7 unsummarized > 4: a summary is due
    buffer = editor.get(url("console-user-room-buffer", owner, maria, room.pk)).content.decode()
    assert '<strong class="buffer-unsummarized">7</strong>' in buffer
    assert 'hx-trigger="every 2s"' in buffer and "Over capacity" in buffer
    room_summarize(room_id=room.pk)
    buffer = editor.get(url("console-user-room-buffer", owner, maria, room.pk)).content.decode()
    assert 'hx-trigger="every 2s"' not in buffer


def test_the_summaries_chain_with_the_turns_each_covers(owner, editor, room, maria):
    summaries = list(Memory.objects.filter(room=room, kind="summary").order_by("-created_at"))
    html = editor.get(url("console-user-room-view", owner, maria, room.pk)).content.decode()
    positions = [html.index(f'data-summary="{s.pk}"') for s in summaries]
    assert positions == sorted(positions)  # newest first
    assert html.count('class="summary is-superseded"') == 3
    assert "chain covers 8" in html
    newest = summaries[0]
    turns_url = url("console-user-room-summary-turns", owner, maria, room.pk, newest.pk)
    assert f'hx-get="{turns_url}"' in html
    turns = editor.get(turns_url).content.decode()
    covered = Memory.objects.filter(public_id__in=newest.source_ids).order_by("created_at")
    assert [m.content[:7] for m in covered] == ["Turn 6:", "Turn 7:"]
    assert "Turn 6:" in turns and "Turn 7:" in turns and "Turn 5:" not in turns
    chain = editor.get(url("console-user-room-summaries", owner, maria, room.pk), {"page": "1"})
    assert chain.content.decode().count("data-summary=") == 4
    other = Room.objects.create(project=owner.project, external_id="elsewhere")
    stray = url("console-user-room-summary-turns", owner, maria, other.pk, newest.pk)
    assert editor.get(stray).status_code == 404


def test_the_rooms_own_settings(owner, editor, room, maria):
    html = editor.get(url("console-user-room-view", owner, maria, room.pk)).content.decode()
    assert 'data-setting="buffer.max_size"' in html
    assert html.count('</code> <span class="badge">room</span>') == 3  # max_size, multiplier, batch
    assert "project: 10" in html  # the project's max_size beside the room's 2
    save = url("console-user-room-settings", owner, maria, room.pk, "working")
    response = editor.post(save, {"ttl_seconds": "120", "max_memory_mb": "10.0"}, **HTMX)
    assert response.status_code == 200 and "Saved." in response.content.decode()
    room.refresh_from_db()
    assert room.settings["working"] == {"ttl_seconds": 120}
    revision = SettingsRevision.objects.filter(room=room).latest("created_at")
    assert (revision.actor_type, revision.actor) == ("operator", "erin")
    bad = editor.post(save, {"ttl_seconds": "0", "max_memory_mb": "10.0"}, **HTMX)
    assert bad.status_code == 422 and "working.ttl_seconds: " in bad.content.decode()
    room.refresh_from_db()
    assert room.settings["working"] == {"ttl_seconds": 120}
    buffer = url("console-user-room-settings", owner, maria, room.pk, "buffer")
    editor.post(buffer, {"reset": "max_size"}, **HTMX)
    room.refresh_from_db()
    assert "max_size" not in room.settings["buffer"]
    assert editor.post(buffer, {"reset": "nonsense"}, **HTMX).status_code == 422
    search = url("console-user-room-settings", owner, maria, room.pk, "search")
    assert editor.post(search, {"rrf_k": "3"}).status_code == 404


def test_working_memory_with_ttls_and_delete(owner, editor, room, maria):
    note = working_add(room=room, content="The user is booking a flight", ttl_seconds=600)
    working_add(room=room, content="Tool output: 3 flights found")
    html = editor.get(url("console-user-room-view", owner, maria, room.pk)).content.decode()
    assert "The user is booking a flight" in html and "2 live" in html
    assert f'datetime="{note.expires_at:%Y-%m-%dT%H:%M:%S}' in html
    delete = url("console-user-room-working-delete", owner, maria, room.pk, note.id)
    response = editor.post(delete, **HTMX)
    assert "Deleted." in response.content.decode() and "1 live" in response.content.decode()
    assert [item.content for item in working_list(room=room).items] == [
        "Tool output: 3 flights found"
    ]
    assert "gone already" in editor.post(delete, **HTMX).content.decode()


def test_the_messages_pages_and_a_source_turn_on_its_page(owner, editor, room, maria):
    ids = append(owner, 120, room="r2", start=100)
    r2 = Room.objects.get(project=owner.project, external_id="r2")
    view = url("console-user-room-view", owner, maria, r2.pk)
    html = editor.get(view).content.decode()
    assert "120 messages, oldest first; page 3 of 3" in html  # the newest page by default
    page_one = editor.get(view, {"page": "1"}, **HTMX).content.decode()
    assert 'id="room-messages"' in page_one and "<html" not in page_one
    assert "Turn 100:" in page_one and "Turn 150:" not in page_one
    early = Memory.objects.get(public_id=ids[5])  # Turn 105, on page 1 (pages 20, 50, 50)
    at_turn = editor.get(view, {"turn": str(early.pk)}).content.decode()
    assert "page 1 of 3" in at_turn
    assert f'is-target" id="turn-{early.pk}"' in at_turn
    assert "page 3 of 3" in editor.get(view, {"turn": "junk"}).content.decode()


def test_viewers_read_only_other_projects_and_rooms_not_at_all(owner, outsider, room, maria):
    viewer = operator_client("victor", project=owner.project, role=Membership.Role.VIEWER)
    view = url("console-user-room-view", owner, maria, room.pk)
    html = viewer.get(view).content.decode()
    assert "Save buffer" not in html and "<fieldset disabled>" in html
    save = url("console-user-room-settings", owner, maria, room.pk, "buffer")
    assert viewer.post(save, {"max_size": "5"}).status_code == 403
    delete = url("console-user-room-working-delete", owner, maria, room.pk, "x")
    assert viewer.post(delete).status_code == 403
    stranger = operator_client("sam", project=outsider.project)
    assert stranger.get(view).status_code == 404
    assert stranger.get(url("console-user-rooms", owner, maria)).status_code == 404
    # a room she has no memories in
    append(owner, 1, room="bobs", user="bob")
    bobs = Room.objects.get(project=owner.project, external_id="bobs")
    assert viewer.get(url("console-user-room-view", owner, maria, bobs.pk)).status_code == 404
