import pytest

from memories.models import Memory


def test_create_and_get_memory(owner):
    response = owner.client.post("/api/v1/memories/", {"user": "alice", "content": "I like tea"})
    assert response.status_code == 201, response.json()
    memory_id = response.json()["memory"]["id"]
    assert Memory.objects.get(pk=memory_id).embedding_status == "pending"
    assert owner.client.get(f"/api/v1/memories/{memory_id}/").json()["content"] == "I like tea"


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_worker_embeds_and_vector_search_finds(owner, celery_worker_process):
    from tests.conftest import wait_until

    texts = ["My cat is called Whiskers", "I work as a nurse in Boston", "We went skiing in March"]
    response = owner.client.post(
        "/api/v1/memories/batch/", {"memories": [{"user": "bob", "content": t} for t in texts]}
    )
    assert response.status_code == 201
    wait_until(lambda: not Memory.objects.filter(embedding_status="pending").exists())
    result = owner.client.post(
        "/api/v1/search/", {"user": "bob", "query": "what is the name of my pet?", "mode": "vector", "k": 1}
    ).json()
    assert result["results"][0]["memory"]["content"] == "My cat is called Whiskers"
