"""The embedding model switch from the project list's actions, and the switches' list
(memories/admin/embedding.py)."""

import pytest

from memories.models import EmbeddingSwitch
from memories.services import embedding_switch as switching
from tests.memories.services.test_embedding_switch import endpoint, endpoint_server

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["endpoint", "endpoint_server"]  # fixtures, used by name
PROJECTS = "/admin/memories/project/"


@pytest.fixture(autouse=True)
def jobs(monkeypatch):
    sent = []
    monkeypatch.setattr(switching, "_job_send", lambda pk, countdown=None: sent.append(pk))
    return sent


def act(admin_client, action, *projects):
    data = {"action": action, "_selected_action": [p.pk for p in projects]}
    return admin_client.post(PROJECTS, data, follow=True).content.decode()


def test_a_curator_switches_a_project_and_follows_it_in_the_switches_list(
    admin_client, owner, outsider, endpoint, jobs
):
    page = admin_client.get(PROJECTS).content.decode()
    assert "Switch the embedding model to mpnet-base" in page
    assert "Switch the embedding model to openai" in page

    html = act(admin_client, "embedding_switch_to_openai", owner.project)
    switch = EmbeddingSwitch.objects.get()
    assert (switch.project, switch.requested_by, jobs) == (
        owner.project,
        "operator:admin",
        [switch.pk],
    )
    assert "switching to openai" in html

    listed = admin_client.get("/admin/memories/embeddingswitch/").content.decode()
    assert "running" in listed and "0/0" in listed
    assert (
        admin_client.get(f"/admin/memories/embeddingswitch/{switch.pk}/change/").status_code == 200
    )

    refused = act(admin_client, "embedding_switch_to_openai", owner.project)
    assert "a switch of this project is running" in refused
    act(admin_client, "embedding_switch_cancel", owner.project, outsider.project)
    switch.refresh_from_db()
    assert switch.status == "cancelled"
    assert not EmbeddingSwitch.objects.filter(project=outsider.project).exists()
