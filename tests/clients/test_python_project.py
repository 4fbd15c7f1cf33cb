"""The sync client's project calls against a live hub: settings, pruning, a room's
buffer window and working memory."""

from __future__ import annotations

import pytest
from memoryhub_client import BadRequest, MemoryHub, NotFound, PruneRun, WorkingItem

pytestmark = pytest.mark.django_db(transaction=True)


def test_settings_are_read_changed_and_recorded(hub: MemoryHub) -> None:
    settings = hub.settings.get()
    assert (
        settings.values["search"]["keyword_weight"] == settings.defaults["search"]["keyword_weight"]
    )
    assert "search" in settings.schema
    changed = hub.settings.update({"search": {"keyword_weight": 0.7}})
    assert changed.values["search"]["keyword_weight"] == 0.7
    assert changed.overrides == {"search": {"keyword_weight": 0.7}}
    hub.settings.update({"search": {"keyword_weight": None}})  # back to the default
    revisions = list(hub.settings.revisions(limit=1))
    assert len(revisions) == 2 and revisions[0].actor_type == "api_key"
    assert revisions[1].after == {"search": {"keyword_weight": 0.7}}
    assert hub.settings.revisions_page().count == 2
    with pytest.raises(BadRequest) as bad:
        hub.settings.update({"search": {"keyword_weight": 7}})
    assert bad.value.fields == {"search.keyword_weight": ["Must be at most 1.0."]}


def test_pruning_is_previewed_run_and_followed(hub: MemoryHub) -> None:
    hub.settings.update({"pruning": {"fifo_per_user_kind": 1}})
    hub.memories.add_batch([{"content": f"m{n}"} for n in range(3)], user="alice")
    preview = hub.prune.preview(user="alice")
    assert isinstance(preview, PruneRun) and preview.dry_run
    assert preview.counts["fifo"] == 2 and len(preview.ids["fifo"]) == 2
    assert hub.memories.count(user="alice") == 3  # a preview changes nothing
    run = hub.prune.run()
    assert run.dry_run is False and run.status in ("queued", "running", "done")
    assert hub.prune.get(run.id).id == run.id
    assert {r.id for r in hub.prune.runs(limit=1)} >= {run.id}
    assert hub.prune.runs_page().count >= 1
    with pytest.raises(NotFound):
        hub.prune.get(999999)


def test_the_buffer_window_holds_the_last_turns(hub: MemoryHub) -> None:
    hub.rooms.create("chat-1")
    hub.rooms.update("chat-1", settings={"buffer": {"max_size": 3}})
    hub.memories.add_batch(
        [{"content": f"turn {n}", "role": "user"} for n in range(5)], user="alice", room="chat-1"
    )
    window = hub.buffer.window(room="chat-1")
    assert [m.content for m in window.messages] == ["turn 2", "turn 3", "turn 4"]
    assert (window.settings.max_size, window.settings.capacity) == (3, 30)
    assert window.unsummarized == 5 and window.summary is None
    # no vectors yet (no worker here): ranked by recency, and the hub says so
    found = hub.buffer.search("turn", room="chat-1", limit=2)
    assert [hit.memory.content for hit in found.results] == ["turn 4", "turn 3"]
    assert found.unembedded == 5 and found.results[0].recency == 1.0


def test_working_memory_is_kept_searched_and_dropped(hub: MemoryHub) -> None:
    hub.rooms.create("chat-1")
    weather = hub.working.add(
        "weather tool: Lisbon 24C, sunny",
        room="chat-1",
        metadata={"tool": "weather"},
        ttl_seconds=900,
    )
    assert isinstance(weather, WorkingItem) and weather.metadata == {"tool": "weather"}
    hub.working.add(
        "calendar tool: dentist on Friday at 10", room="chat-1", metadata={"tool": "calendar"}
    )
    listed = hub.working.list(room="chat-1")
    assert listed.count == 2 and [i.id for i in listed.results][0] == weather.id
    assert listed.results[0].expires_at is not None
    found = hub.working.search("what is the forecast?", room="chat-1", limit=1)
    assert [hit.item.id for hit in found.results] == [weather.id]
    assert found.method == "semantic" and found.results[0].score is not None
    only = hub.working.search("anything", room="chat-1", filter_metadata={"tool": "calendar"})
    assert [hit.item.metadata["tool"] for hit in only.results] == ["calendar"]
    assert hub.working.delete(weather.id, room="chat-1") is None
    assert hub.working.clear(room="chat-1") == 1
    assert hub.working.list(room="chat-1").count == 0
