"""The sync client's calls that need vectors, against a live hub with a real Celery
worker: search, context, buffer search by meaning, and documents from upload to their
chunks (uploaded as bytes, a path, a file and text; followed with wait_until_done)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from memoryhub_client import Document, DocumentFailed, MemoryHub, NotFound

from tests.conftest import wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MANUAL = (
    "# Aurora 3000\n\n## Care\n\nDescale the Aurora 3000 every 3 months with citric acid.\n\n"
    "## Warranty\n\nThe warranty lasts two years from the date of purchase. Keep the receipt: "
    "a repair under warranty needs it, and the serial number on the back of the machine.\n"
)


def all_embedded(hub: MemoryHub, user: str) -> None:
    wait_until(
        lambda: (
            hub.memories.count(user=user) > 0
            and all(m.embedding_status == "done" for m in hub.memories.list(user=user))
        ),
        timeout=60,
    )


def test_search_finds_by_meaning_and_explains(hub: MemoryHub, celery_worker_process) -> None:
    hub.memories.add_batch(
        [
            {"content": "I adopted a cat called Miso", "role": "user"},
            {"content": "The weather in Porto was rainy all week", "role": "user"},
            {"content": "My favourite food is grilled sardines", "role": "user"},
        ],
        user="alice",
        room="chat-1",
    )
    all_embedded(hub, "alice")
    found = hub.search("which pet does she have?", user="alice", mode="vector", k=2, explain=True)
    assert found.mode == "vector"
    assert found.results[0].memory.content == "I adopted a cat called Miso"
    top = found.results[0]
    assert 0.0 < top.similarity <= 1.0 and top.explain  # per-signal scores on request
    assert "total" in found.timings_ms or found.timings_ms
    auto = hub.search("cat Miso", user="alice", k=3)
    assert auto.results[0].memory.content == "I adopted a cat called Miso"
    assert hub.search("cat", user="bob").results == []  # another user's memories: none
    close = hub.search("which pet?", user="alice", mode="vector", threshold=0.99)
    assert close.results == []


def test_context_fits_the_budget_with_its_sections(hub: MemoryHub, celery_worker_process) -> None:
    hub.memories.add(
        "User is allergic to peanuts.",
        user="alice",
        kind="fact",
        content_json={"category": "health"},
        confidence=1.0,
    )
    hub.memories.add_batch(
        [{"content": f"Turn {n}: we talked about recipes", "role": "user"} for n in range(6)],
        user="alice",
        room="chat-1",
    )
    all_embedded(hub, "alice")
    context = hub.context(
        "does she have any food allergies?",
        user="alice",
        room="chat-1",
        max_tokens=300,
        explain=True,
    )
    assert context.total_tokens <= 300 and context.max_tokens == 300
    assert "User is allergic to peanuts." in context.prompt
    facts = context.section("facts")
    assert facts is not None and facts.items[0].kind == "fact" and facts.items[0].why
    assert context.section("history") is not None
    scoped = hub.scoped(user="alice", room="chat-1").context(
        messages=[{"role": "user", "content": "any allergies?"}], max_tokens=200
    )
    assert scoped.total_tokens <= 200 and "peanuts" in scoped.prompt


def test_buffer_search_ranks_by_meaning(hub: MemoryHub, celery_worker_process) -> None:
    turns = ["I adopted a cat called Miso", "We booked flights to Tokyo", "Dinner was pasta"]
    hub.memories.add_batch(
        [{"content": t, "role": "user"} for t in turns], user="alice", room="chat-1"
    )
    all_embedded(hub, "alice")
    found = hub.buffer.search("my pet", room="chat-1", limit=1, recency_bias=0.0)
    assert found.method == "semantic" and found.unembedded == 0
    assert found.results[0].memory.content == "I adopted a cat called Miso"
    assert found.results[0].semantic is not None and found.recency_bias == 0.0


def manual_upload(hub: MemoryHub) -> Document:
    return hub.documents.upload_text(
        MANUAL,
        source="aurora.md",
        title="Aurora 3000 manual",
        chunker="recursive",
        chunker_settings={"chunk_size": 100, "chunk_overlap": 20},
    )


def test_a_text_document_is_followed_to_its_chunks(hub: MemoryHub, celery_worker_process) -> None:
    seen: list[tuple[str, int, int]] = []
    text = manual_upload(hub)
    assert isinstance(text, Document) and text.status == "queued" and not text.duplicate
    done = hub.documents.wait_until_done(
        text.id,
        timeout=120,
        interval=0.2,
        on_progress=lambda d: seen.append((d.status, d.progress.done, d.progress.total)),
    )
    assert done.status == "done" and done.progress.percent == 100.0
    # called when it moved only (the total moves too: chunking 0/0, then 0/4 on a slow poll)
    assert seen[-1][0] == "done" and len(seen) == len(set(seen))
    chunks = list(hub.documents.chunks(text.id, limit=1))
    indexes = [chunk.chunk_index for chunk in chunks]
    assert len(chunks) >= 2 and indexes == sorted(indexes)
    assert chunks[0].citation["document"]["title"] == "Aurora 3000 manual"
    assert hub.documents.chunks_page(text.id).count == len(chunks)
    found = hub.search("how often should I descale it?", kind="knowledge", k=1)
    assert "Descale" in found.results[0].memory.content
    again = manual_upload(hub)  # the same bytes again: the document it already has
    assert again.duplicate and again.id == text.id


def test_files_are_uploaded_reingested_and_deleted(
    hub: MemoryHub, celery_worker_process, tmp_path: Path
) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("Refunds are paid within 14 days.")
    from_path = hub.documents.upload(path, user="alice", metadata={"team": "ops"})
    assert (from_path.source, from_path.user, from_path.metadata) == (
        "notes.txt",
        "alice",
        {"team": "ops"},
    )
    from_bytes = hub.documents.upload(b"Shipping takes 3 days.", filename="ship.txt")
    from_file = hub.documents.upload(io.BytesIO(b"Returns within 30 days."), filename="ret.txt")
    for document in (from_path, from_bytes, from_file):
        assert hub.documents.wait_until_done(document.id, timeout=120).status == "done"
    assert hub.documents.page(user="alice").count == 1
    listed = {d.id for d in hub.documents.list(limit=2)}
    assert listed == {from_path.id, from_bytes.id, from_file.id}
    again = hub.documents.reingest(from_bytes.id, chunker="token_window")
    assert hub.documents.wait_until_done(again.id, timeout=120).chunker == "token_window"
    assert hub.documents.delete(from_file.id) is None
    with pytest.raises(NotFound):
        hub.documents.get(from_file.id)


def test_a_failed_document_raises_with_its_error(hub: MemoryHub, celery_worker_process) -> None:
    broken = hub.documents.upload(b"%PDF-1.4\nnot really a pdf", filename="broken.pdf")
    with pytest.raises(DocumentFailed) as failed:
        hub.documents.wait_until_done(broken.id, timeout=120, interval=0.2)
    assert failed.value.document.status == "failed" and failed.value.document.error
