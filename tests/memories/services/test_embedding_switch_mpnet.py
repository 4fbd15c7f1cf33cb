"""A project switched to the second packaged model, all-mpnet-base-v2 (768 dimensions,
its files reassembled from the PyPI parts once into the data folder), for real: the
switch completes, the searches read its space and find by meaning, and other projects
stay on the configured model."""

import pytest

from memories.models import Embedding, Project
from memories.services.embedding_spaces import project_space, project_space_read
from memories.services.embedding_switch import embedding_switch_run, embedding_switch_start
from memories.services.search import memory_search
from tests.memories.services.test_embedding_switch import ACTOR, TEXTS, written

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_project_switched_to_mpnet_searches_its_768_dimensional_space(owner, outsider):
    written(owner.project, TEXTS)
    written(outsider.project, TEXTS[:2], user="bob")
    switch = embedding_switch_start(
        project=owner.project, model="mpnet-base", actor=ACTOR, queue=False
    )
    assert embedding_switch_run(switch_id=switch.pk, max_seconds=None) == "completed"

    project = Project.objects.get(pk=owner.project.pk)
    assert project_space(project).dimension == 768
    assert Embedding.objects.filter(space=switch.target).count() == len(TEXTS)
    for query, expected in [
        ("Which pet sleeps on the musical instrument?", TEXTS[0]),
        ("What food can't I eat?", TEXTS[4]),
        ("Where did I relocate for work?", TEXTS[1]),
    ]:
        hits = memory_search(project=project, query=query, mode="vector", k=1).hits
        assert hits[0].memory.content == expected, query
        assert hits[0].similarity > 0.3
    assert project_space_read(outsider.project.pk).dimension == 384
    assert not Embedding.objects.filter(space=switch.target, memory__project=outsider.project)
