"""The long-memory embedding benchmark's texts, modes, ratios and command line
(bench/long_memories.py); the measuring itself is the benchmark's, not a test's."""

import statistics

import pytest

from bench.long_memories import arguments, cost_ratios, windows_mode
from bench.synthetic_text import texts_generate
from memories.providers.embeddings import LocalEmbeddingProvider


def test_short_texts_are_chat_turns() -> None:
    words = [len(text.split()) for text in texts_generate("short", 500, seed=7)]
    assert min(words) >= 10 and max(words) <= 30
    assert 18 <= statistics.mean(words) <= 22


def test_long_texts_are_answers_with_a_long_tail() -> None:
    words = [len(text.split()) for text in texts_generate("long", 300, seed=7)]
    assert min(words) >= 100 and max(words) <= 900
    assert 280 <= statistics.mean(words) <= 340
    assert max(words) > 2 * statistics.median(words)


def test_maximum_texts_are_exactly_the_content_limit() -> None:
    texts = texts_generate("maximum", 3, seed=7, max_chars=32_000)
    assert [len(text) for text in texts] == [32_000] * 3
    assert len(set(texts)) == 3


def test_modes_get_texts_of_the_same_lengths_but_other_words() -> None:
    """Else the second mode would copy the first one's vectors (same content hash)."""
    windowed = texts_generate("long", 50, seed=7, variant="windowed")
    truncated = texts_generate("long", 50, seed=7, variant="truncated")
    assert [len(t.split()) for t in windowed] == [len(t.split()) for t in truncated]
    assert not set(windowed) & set(truncated)
    assert texts_generate("long", 50, seed=7, variant="windowed") == windowed
    assert texts_generate("long", 50, seed=8, variant="windowed") != windowed


def test_truncated_mode_reads_each_text_whole_then_restores_windows() -> None:
    provider = LocalEmbeddingProvider("all-MiniLM-L6-v2", 384, 64, 1, 128, 32)
    with windows_mode(provider, "truncated"):
        assert provider.windows("x" * 5_000) == [(0, 5_000)]
    assert provider.windows.__func__ is LocalEmbeddingProvider.windows  # type: ignore[attr-defined]


def test_cost_is_the_ratio_of_time_per_memory() -> None:
    rows = [
        {"size": "long", "mode": "truncated", "memories": 100, "seconds": 10.0, "cpu_seconds": 8.0},
        {"size": "long", "mode": "windowed", "memories": 50, "seconds": 12.5, "cpu_seconds": 12.0},
        {"size": "short", "mode": "windowed", "memories": 10, "seconds": 1.0, "cpu_seconds": 1.0},
    ]
    assert cost_ratios(rows) == {"long": {"seconds": 2.5, "cpu_seconds": 3.0}}


def test_arguments() -> None:
    args = arguments(["--quick", "--peak-count", "8", "--keep"])
    assert (args.quick, args.peak_count, args.keep, args.peak_child) == (True, 8, True, None)
    with pytest.raises(SystemExit):
        arguments(["--peak-count", "0"])
