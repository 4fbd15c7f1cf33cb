"""Long memories: windows counted in the model's tokens, every window stored and
replaced at once, the window budget of a batch, the cache, and the re-windowing of
memories embedded whole before."""

import numpy as np
import pytest

from memories.models import Embedding, Memory
from memories.providers.embeddings import get_provider, token_windows
from memories.services import embedding as pipeline
from memories.services import embedding_spaces
from memories.services.embedding import (
    embedding_process_batch,
    embedding_run,
    embedding_space_get,
)
from memories.services.embedding_rewindow import embedding_rewindow
from memories.services.memories import memory_delete, memory_update
from memories.services.revisions import Actor
from tests.memories.conftest import CountingProvider, pending, windows_of

WORDS = 10  # the test provider's window, in words


@pytest.fixture
def windowing(monkeypatch):
    counting = CountingProvider(model="windows-test", window_words=WORDS)
    monkeypatch.setattr(embedding_spaces, "get_provider", lambda: counting)
    return counting


def words(first, count):
    return " ".join(f"w{n}" for n in range(first, first + count))


class TestTokenWindows:
    def test_a_short_text_is_one_window(self):
        assert token_windows([(0, 2), (3, 5)], length=5, size=2, overlap=1) == [(0, 5)]

    def test_windows_cover_the_text_and_overlap(self):
        text = "aa bb cc dd ee ff g"
        offsets = [(0, 2), (3, 5), (6, 8), (9, 11), (12, 14), (15, 17), (18, 19)]
        windows = token_windows(offsets, length=len(text), size=3, overlap=1)
        assert [text[a:b] for a, b in windows] == ["aa bb cc", "cc dd ee", "ee ff g"]

    def test_the_last_window_ends_with_the_text(self):
        text = "aa bb cc dd  "
        windows = token_windows([(0, 2), (3, 5), (6, 8), (9, 11)], length=13, size=3, overlap=0)
        assert windows == [(0, 8), (9, 13)]
        assert text[windows[-1][0] :] == "dd  "


def test_the_local_model_windows_are_its_own_tokens():
    """all-MiniLM-L6-v2 reads 256 word pieces, two of them its markers."""
    provider = get_provider()
    assert provider.windows("a short text") == [(0, 12)]
    text = " ".join(f"word{n} and more" for n in range(400))
    windows = provider.windows(text)
    assert len(windows) > 1
    assert windows[0][0] == 0 and windows[-1][1] == len(text)
    tokenizer = provider.load().tokenizer
    for start, end in windows:
        assert len(tokenizer(text[start:end], add_special_tokens=False)["input_ids"]) <= 254
    for (_, end), (start, _) in zip(windows, windows[1:], strict=False):
        assert start < end  # consecutive windows overlap


def test_a_long_memory_is_stored_as_all_its_windows(owner, windowing):
    short, long = pending(owner, "a short memory", words(0, 25))
    assert embedding_run() == 2
    assert len(windows_of(short)) == 1
    stored = windows_of(long)
    texts = [long.content[a:b] for a, b in windowing.windows(long.content)]
    assert texts == [words(0, 10), words(9, 10), words(18, 7)]
    assert np.allclose(stored, windowing._inner.embed(texts), atol=1e-6)


def test_an_update_replaces_every_window(owner, windowing):
    (memory,) = pending(owner, words(0, 30))
    embedding_run()
    assert len(windows_of(memory)) == 4
    memory_update(memory=memory, changes={"content": words(100, 12)}, actor=Actor.system("t"))
    # the old windows go with the old text, in the update's transaction
    assert windows_of(memory) == []
    embedding_run()
    memory.refresh_from_db()
    texts = [memory.content[a:b] for a, b in windowing.windows(memory.content)]
    assert np.allclose(windows_of(memory), windowing._inner.embed(texts), atol=1e-6)
    assert len(texts) == 2


def test_deleting_a_memory_deletes_every_window(owner, windowing):
    memory, other = pending(owner, words(0, 40), words(50, 40))
    embedding_run()
    memory_delete(memory=memory, actor=Actor.system("t"))
    assert not Embedding.objects.filter(memory_id=memory.pk).exists()
    assert len(windows_of(other)) == 5


def test_a_batch_embeds_a_bounded_number_of_windows(owner, windowing, monkeypatch):
    """Long texts make smaller batches; the rest waits for the next."""
    monkeypatch.setattr(pipeline, "WINDOWS_PER_MEMORY", 2)
    pending(owner, words(0, 30), words(100, 30), "short")  # 4 windows each, then 1
    space = embedding_space_get(provider=windowing)
    assert embedding_process_batch(space=space, provider=windowing, size=3) == 1
    assert embedding_process_batch(space=space, provider=windowing, size=3) == 2
    assert Memory.objects.pending_embedding().count() == 0


def test_a_long_text_already_embedded_is_copied_window_by_window(owner, windowing):
    first, second = pending(owner, words(0, 30), words(0, 30))
    embedding_run()
    assert windowing.texts.count(words(0, 10)) == 1
    assert np.allclose(windows_of(first), windows_of(second))


def test_memories_embedded_whole_before_are_rewindowed(owner, windowing):
    long, short = pending(owner, words(0, 30), "a short memory")
    embedding_run()
    # as a memory embedded before windows: one vector of its beginning
    Embedding.objects.filter(memory=long, window__gt=0).delete()
    untouched = windows_of(short)
    examined = []
    assert embedding_rewindow(batch_size=1, progress=examined.append) == 1
    assert examined == [1, 1]
    assert len(windows_of(long)) == 4
    assert np.allclose(windows_of(short), untouched)
    assert embedding_rewindow() == 0  # nothing left to do


def test_rewindowing_skips_memories_waiting_for_their_vector(owner, windowing):
    pending(owner, words(0, 30))
    assert embedding_rewindow() == 0
    assert Embedding.objects.count() == 0
