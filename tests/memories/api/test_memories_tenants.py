"""Memories: another project's memories are a 404, never listed or counted."""

import pytest

from memories.models import (
    Memory,
    MemoryRevision,
)
from tests.memories.api.memory_calls import MEMORIES, create

# --- across tenants ----------------------------------------------------------------------


class TestAcrossTenants:
    @pytest.fixture
    def secret(self, owner):
        return create(owner, user="alice", room="r1", kind="fact", content="the secret")

    def test_outsider_gets_404(self, owner, outsider, secret):
        path = f"{MEMORIES}{secret['id']}/"
        assert outsider.client.get(path).status_code == 404
        assert outsider.client.patch(path, {"content": "hacked"}).status_code == 404
        assert outsider.client.delete(path).status_code == 404
        assert outsider.client.get(f"{path}revisions/").status_code == 404
        assert Memory.objects.get(pk=secret["id"]).content == "the secret"
        assert MemoryRevision.objects.filter(memory_id=secret["id"]).count() == 1

    def test_outsider_sees_none_in_lists_and_counts(self, outsider, secret):
        for params in [{}, {"user": "alice"}, {"room": "r1"}, {"kind": "fact"}]:
            listed = outsider.client.get(MEMORIES, params).json()
            assert (listed["count"], listed["results"]) == (0, [])
            assert outsider.client.get(f"{MEMORIES}count/", params).json() == {"count": 0}

    def test_outsider_bulk_delete_deletes_nothing(self, outsider, secret):
        for query in ["room=r1", "user=alice", "kind=fact", "room=r1&user=alice&kind=fact"]:
            response = outsider.client.delete(f"{MEMORIES}?{query}")
            assert response.json()["deleted"] == 0
        assert Memory.objects.filter(pk=secret["id"]).exists()
        assert not MemoryRevision.objects.filter(action="delete").exists()

    def test_outsider_with_the_same_external_ids_gets_its_own_rows(self, owner, outsider, secret):
        theirs = create(outsider, user="alice", room="r1", kind="fact", content="theirs")
        assert outsider.client.get(MEMORIES, {"user": "alice"}).json()["count"] == 1
        assert owner.client.get(MEMORIES, {"user": "alice"}).json()["count"] == 1
        assert outsider.client.delete(f"{MEMORIES}?room=r1").json()["deleted"] == 1
        assert Memory.objects.filter(pk=secret["id"]).exists()
        assert not Memory.objects.filter(pk=theirs["id"]).exists()
