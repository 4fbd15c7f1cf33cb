"""Client-chosen memory ids are scoped to the project (issue 14): two projects may use
the same id, each sees, changes and deletes only its own memory, and nothing tells one
that the other uses it. The id clients see is Memory.public_id; the pk stays internal."""

import threading
import uuid

import pytest
from django.db import connection, transaction

from memories.models import Memory
from memories.services.access import accesses_flush, accesses_sent
from memories.services.memories import MemoryInput, memory_create_batch
from memories.services.revisions import Actor
from synopsis.services.facts import messages_facts_extract
from tests.conftest import embed_pending, wait_until
from tests.memories.services.test_pruning import POLICY, policy_set, seed

MEMORIES = "/api/v1/memories/"


def create(tenant, memory_id, content, status=201, **fields):
    body = {"id": str(memory_id), "content": content, **fields}
    response = tenant.client.post(MEMORIES, body, format="json")
    assert response.status_code == status, response.json()
    return response.json()


def test_two_projects_create_read_change_and_delete_the_same_id(owner, outsider):
    memory_id = uuid.uuid4()
    mine = create(owner, memory_id, "the owner's note", user="alice")
    theirs = create(outsider, memory_id, "the outsider's note", user="alice")
    assert mine["memory"]["id"] == theirs["memory"]["id"] == str(memory_id)
    # the first keeps the id as its pk; the second gets a pk of its own, never shown
    assert Memory.objects.get(project=owner.project).pk == memory_id
    hidden = Memory.objects.get(project=outsider.project)
    assert hidden.public_id == memory_id and hidden.pk != memory_id

    # a retry in each project returns that project's memory
    again = create(owner, memory_id, "the owner's note", status=200, user="alice")
    assert (again["created"], again["memory"]["content"]) == (False, "the owner's note")
    again = create(outsider, memory_id, "the outsider's note", status=200, user="alice")
    assert (again["created"], again["memory"]["content"]) == (False, "the outsider's note")
    # a different text under the id is a conflict only within the project
    conflict = create(owner, memory_id, "something else", status=409)
    assert str(memory_id) in str(conflict)

    url = f"{MEMORIES}{memory_id}/"
    assert owner.client.get(url).json()["content"] == "the owner's note"
    assert outsider.client.get(url).json()["content"] == "the outsider's note"
    changed = outsider.client.patch(url, {"content": "changed"}, format="json")
    assert (changed.status_code, changed.json()["id"]) == (200, str(memory_id))
    assert owner.client.get(url).json()["content"] == "the owner's note"
    listed = outsider.client.get(MEMORIES).json()["results"]
    assert [(m["id"], m["content"]) for m in listed] == [(str(memory_id), "changed")]

    history = outsider.client.get(f"{url}revisions/").json()["results"]
    assert [r["action"] for r in history] == ["update", "create"]
    assert {r["memory_id"] for r in history} == {str(memory_id)}
    assert history[0]["after"]["content"] == "changed"
    assert [r["action"] for r in owner.client.get(f"{url}revisions/").json()["results"]] == [
        "create"
    ]

    assert outsider.client.delete(url).status_code == 204
    assert outsider.client.get(url).status_code == 404
    assert owner.client.get(url).json()["content"] == "the owner's note"
    deleted = outsider.client.get(f"{url}revisions/").json()["results"]
    assert [r["action"] for r in deleted] == ["delete", "update", "create"]
    assert owner.client.delete(url).status_code == 204
    assert not Memory.objects.exists()


def test_an_id_taken_first_elsewhere_is_free_in_a_batch(owner, outsider):
    taken, fresh = uuid.uuid4(), uuid.uuid4()
    create(outsider, taken, "the outsider's")
    items = [{"id": str(taken), "content": "one"}, {"id": str(fresh), "content": "two"}]
    response = owner.client.post(f"{MEMORIES}batch/", {"memories": items}, format="json")
    assert response.status_code == 201, response.json()
    results = response.json()["results"]
    assert [(r["created"], r["memory"]["id"]) for r in results] == [
        (True, str(taken)),
        (True, str(fresh)),
    ]
    # the same id twice in one batch is one memory
    twice = [{"id": str(taken), "content": "three"}] * 2
    response = outsider.client.post(f"{MEMORIES}batch/", {"memories": twice}, format="json")
    assert response.status_code == 409  # the outsider's id holds another text


def test_search_context_and_history_answer_each_projects_own(owner, outsider):
    memory_id = uuid.uuid4()
    create(owner, memory_id, "I keep bees on the roof of my flat", user="alice")
    create(outsider, memory_id, "I keep chickens in the garden of my house", user="alice")
    embed_pending()
    for tenant, word in ((owner, "bees"), (outsider, "chickens")):
        hits = tenant.client.post(
            "/api/v1/search/", {"query": "what animals do I keep", "user": "alice"}, format="json"
        ).json()["results"]
        assert [(h["memory"]["id"], word in h["memory"]["content"]) for h in hits] == [
            (str(memory_id), True)
        ]
        context = tenant.client.post(
            "/api/v1/context/", {"user": "alice", "query": "what animals do I keep"}, format="json"
        ).json()
        items = [item for section in context["sections"] for item in section["items"]]
        assert [(i["id"], word in i["text"]) for i in items] == [(str(memory_id), True)]
    # the accesses were recorded on each project's own row
    accesses_sent()
    accesses_flush()
    counts = dict(Memory.objects.values_list("project", "access_count"))
    assert counts == {owner.project.pk: 2, outsider.project.pk: 2}


def test_a_fact_names_the_message_it_came_from_by_its_public_id(owner, outsider):
    memory_id = uuid.uuid4()
    create(owner, memory_id, "the owner's note")
    create(outsider, memory_id, "Hi! My name is Maria.", user="maria", role="user")
    message = Memory.objects.get(project=outsider.project)
    assert message.pk != memory_id
    messages_facts_extract(memory_ids=[message.pk])
    fact = Memory.objects.get(project=outsider.project, kind=Memory.Kind.FACT)
    assert fact.source_ids == [str(memory_id)]
    assert fact.metadata["extracted_from"] == str(memory_id)
    shown = outsider.client.get(f"{MEMORIES}{fact.public_id}/").json()
    assert shown["source_ids"] == [str(memory_id)]


def test_a_prune_run_lists_the_public_ids(owner):
    rows = seed(owner.project)
    policy_set(owner.project, **POLICY)
    public = uuid.uuid4()  # as if another project had held m5's id first
    Memory.objects.filter(pk=rows["m5"].pk).update(public_id=public)
    run = owner.client.post("/api/v1/prune/", {"dry_run": True}, format="json").json()
    assert run["ids"]["age"] == [str(public), str(rows["m1"].public_id)]
    assert owner.client.get(f"{MEMORIES}{public}/").json()["content"] == rows["m5"].content


@pytest.mark.django_db(transaction=True)
def test_a_concurrent_create_of_the_id_in_another_project_waits_then_gets_its_own(owner, outsider):
    """The outsider's create waits on the owner's uncommitted row holding the id as its
    pk, fails on the pk once it commits, and its retry stores a memory of its own."""
    memory_id = uuid.uuid4()
    responses = []

    def second_writer():
        try:
            body = {"id": str(memory_id), "content": "the outsider's"}
            responses.append(outsider.client.post(MEMORIES, body, format="json"))
        finally:
            connection.close()

    with transaction.atomic():
        item = MemoryInput(id=memory_id, content="the owner's")
        [(first, created)] = memory_create_batch(
            project=owner.project, items=[item], actor=Actor.system("test")
        )
        assert created and first.pk == memory_id
        thread = threading.Thread(target=second_writer)
        thread.start()

        def second_writer_waits():
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                return cursor.fetchone()[0] > 0

        wait_until(second_writer_waits)
    thread.join(timeout=30)
    [response] = responses
    assert response.status_code == 201, response.json()
    assert response.json()["memory"]["id"] == str(memory_id)
    theirs = Memory.objects.get(project=outsider.project)
    assert (theirs.public_id, theirs.content) == (memory_id, "the outsider's")
    assert theirs.pk != memory_id
    assert Memory.objects.get(pk=memory_id).content == "the owner's"
