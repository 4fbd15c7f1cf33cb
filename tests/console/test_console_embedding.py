"""The embedding model card of the console's settings page (console/views/embedding.py):
the model in use, a switch started by an editor and followed (the card polls itself
while it runs), a refusal shown in place, cancel, and who may do what."""

import pytest

from memories.models import EmbeddingSwitch
from memories.services import embedding_switch as switching
from memories.services.embedding_switch import embedding_switch_run
from tests.conftest import embed_pending
from tests.console.test_console_projects import editor, project_url, remember, viewer
from tests.memories.services.test_embedding_switch import endpoint, endpoint_server

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["editor", "endpoint", "endpoint_server", "viewer"]  # fixtures, used by name


@pytest.fixture(autouse=True)
def jobs(monkeypatch):
    sent = []
    monkeypatch.setattr(switching, "_job_send", lambda pk, countdown=None: sent.append(pk))
    return sent


def test_the_settings_page_shows_the_model_and_the_others(owner, editor, endpoint):
    html = editor.get(project_url(owner.project, "settings/")).content.decode()
    card = html[
        html.index('id="embedding-card"') : html.index(
            "</section>", html.index('id="embedding-card"')
        )
    ]
    assert "<code>minilm-l6</code> (384 dimensions)" in card
    assert '<option value="mpnet-base">' in card and '<option value="openai">' in card
    assert '<option value="minilm-l6">' not in card  # the one in use
    assert "every 2s" not in card  # nothing to follow


def test_an_editor_switches_follows_and_the_card_stops_polling_when_done(
    owner, editor, endpoint, jobs
):
    remember(owner, "one", "two", "three")
    embed_pending()
    url = project_url(owner.project, "embedding/switch/")
    card = editor.post(url, {"model": "openai"}, HTTP_HX_REQUEST="true").content.decode()
    switch = EmbeddingSwitch.objects.get()
    assert jobs == [switch.pk]
    assert 'hx-trigger="every 2s"' in card and "0/3 memories" in card
    assert "Cancel the switch" in card
    assert switch.requested_by == "operator:erin"

    embedding_switch_run(switch_id=switch.pk, max_seconds=None)
    card = editor.get(project_url(owner.project, "embedding/")).content.decode()
    assert "every 2s" not in card
    assert "<code>openai</code> (32 dimensions)" in card
    assert "3/3 memories" in card and "completed" in card and 'aria-valuenow="100"' in card


def test_a_refused_switch_is_shown_in_place_and_changes_nothing(owner, editor, endpoint):
    response = editor.post(project_url(owner.project, "embedding/switch/"), {"model": "nope"})
    assert response.status_code == 422
    assert "unknown model &#x27;nope&#x27;" in response.content.decode()
    assert not EmbeddingSwitch.objects.exists()


def test_an_editor_cancels(owner, editor, endpoint):
    url = project_url(owner.project, "embedding/switch/")
    editor.post(url, {"model": "openai"})
    card = editor.post(url, {"cancel": "1"}).content.decode()
    assert EmbeddingSwitch.objects.get().status == "cancelled"
    assert "cancelled" in card and "every 2s" not in card


def test_a_viewer_sees_the_card_but_cannot_switch(owner, viewer, endpoint):
    html = viewer.get(project_url(owner.project, "settings/")).content.decode()
    assert 'id="embedding-card"' in html and "Switch to" not in html
    response = viewer.post(project_url(owner.project, "embedding/switch/"), {"model": "openai"})
    assert response.status_code == 403
    assert not EmbeddingSwitch.objects.exists()


def test_another_projects_card_is_404(owner, outsider, editor, endpoint):
    assert editor.get(project_url(outsider.project, "embedding/")).status_code == 404
    url = project_url(outsider.project, "embedding/switch/")
    assert editor.post(url, {"model": "openai"}).status_code == 404
