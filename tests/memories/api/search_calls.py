"""Searches through the API, and the small corpus most search tests run on."""

from __future__ import annotations

from tests.conftest import embed_pending

SEARCH = "/api/v1/search/"

ALICE = [
    "My cat is called Whiskers",
    "I work as a nurse at the general hospital in Boston",
    "We went skiing in the Alps last March",
    "My favourite food is spicy Thai green curry",
    "I am learning to play the violin",
    "My sister lives in Toronto with her two kids",
]


def corpus_make(owner):
    """Alice's memories (ALICE) and one of Bob's, embedded."""
    items = [{"user": "alice", "room": "home", "content": text} for text in ALICE]
    items.append({"user": "bob", "room": "work", "content": "My dog is called Rex"})
    response = owner.client.post("/api/v1/memories/batch/", {"memories": items})
    assert response.status_code == 201
    assert embed_pending() == len(items)
    return owner


def search(tenant, **body):
    response = tenant.client.post(SEARCH, body)
    assert response.status_code == 200, response.json()
    return response.json()


def top(result):
    return [hit["memory"]["content"] for hit in result["results"]]


def search_settings(tenant, **values):
    """The project's search settings overridden (validation is the configuration's)."""
    tenant.project.settings = {"search": values}
    tenant.project.save()
