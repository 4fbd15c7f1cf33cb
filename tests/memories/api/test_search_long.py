"""Search over long memories with the real local model: a memory is embedded whole
(as windows), found by what its end says, and comes back once however many of its
windows are near the query."""

import numpy as np
import pytest

from memories.models import Embedding
from memories.providers.embeddings import get_provider
from tests.conftest import embed_pending

SEARCH = "/api/v1/search/"

GARDEN = (
    "Let me tell you about the garden this year. The tomatoes came up early and the "
    "basil loved the sun by the south wall. We built two new raised beds from cedar "
    "planks, filled them with compost and planted carrots, beetroot and a row of "
    "lettuce that the slugs found within a week. "
)
ENDING = "Oh, and my grandmother's ninetieth birthday party is in Lisbon on the 12th of May."
LONG = GARDEN * 8 + ENDING  # about 500 word pieces: the ending lies past the first window

OTHERS = [
    "I fixed the brakes on my bicycle yesterday",
    "Our team ships the new billing system next sprint",
    "The cat knocked a glass off the kitchen table",
    "I am reading a novel about a lighthouse keeper",
]


def write(tenant, *contents, user="ines"):
    items = [{"user": user, "room": "r", "content": text} for text in contents]
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": items})
    assert response.status_code == 201
    embed_pending()
    return [item["memory"]["id"] for item in response.json()["results"]]


def search(tenant, **body):
    response = tenant.client.post(SEARCH, body)
    assert response.status_code == 200, response.json()
    return response.json()["results"]


def similarity(a, b):
    return float(np.dot(a, b))


@pytest.mark.parametrize("path", ["exact", "compact", "index"])
@pytest.mark.parametrize("aggregate", ["mean", "max"])
@pytest.mark.parametrize("mode", ["vector", "auto"])
def test_a_long_memory_is_found_by_a_phrase_from_its_end(owner, settings, mode, aggregate, path):
    (long_id, *_) = write(owner, LONG, *OTHERS)
    owner.project.settings = {"search": {"window_aggregate": aggregate}}
    owner.project.save()
    if path != "exact":
        compact_max = 0 if path == "index" else 200_000
        settings.RETRIEVAL = {
            **settings.RETRIEVAL,
            "EXACT_SCAN_MAX_ROWS": 0,
            "COMPACT_SCAN_MIN_ROWS": 0,
            "COMPACT_SCAN_MAX_ROWS": compact_max,
        }
    query = "when is my grandmother's birthday party in Lisbon?"
    provider = get_provider()
    query_vector = provider.embed([query])[0]
    # the premise: embedded by its beginning only, the memory hardly resembles the query
    beginning = provider.embed([LONG])[0]  # the model truncates what it reads
    assert similarity(beginning, query_vector) < 0.3
    windows = [np.asarray(row.vector) for row in Embedding.objects.filter(memory_id=long_id)]
    assert len(windows) >= 2
    expected = [similarity(window, query_vector) for window in windows]
    expected = max(expected) if aggregate == "max" else sum(expected) / len(expected)

    hits = search(owner, query=query, user="ines", mode=mode, k=3)
    assert hits[0]["memory"]["id"] == long_id
    assert hits[0]["similarity"] == pytest.approx(expected, abs=1e-5)
    if aggregate == "max":  # ranked by its best window, the one holding the ending
        assert hits[0]["similarity"] > similarity(beginning, query_vector) + 0.15


@pytest.mark.parametrize("path", ["exact", "compact", "index"])
@pytest.mark.parametrize("mode", ["vector", "auto", "hybrid"])
def test_k_distinct_memories_when_one_memorys_windows_crowd_the_top(owner, settings, path, mode):
    hiking = "I went hiking in the mountains with my dog and we camped by a lake. " * 60
    write(owner, hiking, *OTHERS, "We hiked up a mountain trail last summer")
    assert Embedding.objects.filter(memory__content=hiking).count() >= 5
    if path != "exact":
        compact_max = 0 if path == "index" else 200_000
        settings.RETRIEVAL = {
            **settings.RETRIEVAL,
            "EXACT_SCAN_MAX_ROWS": 0,
            "COMPACT_SCAN_MIN_ROWS": 0,
            "COMPACT_SCAN_MAX_ROWS": compact_max,
        }
    hits = search(owner, query="hiking in the mountains", user="ines", mode=mode, k=5)
    ids = [hit["memory"]["id"] for hit in hits]
    assert len(ids) == 5
    assert len(set(ids)) == 5
    assert [hit["memory"]["content"] for hit in hits].count(hiking) == 1
