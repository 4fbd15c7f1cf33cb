"""The configuration page: a setting's "reset to default" (the override removed through
the API's service, recorded like any change) and the recent changes, with each
change's before/after, swapped in after a save without a reload."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memories.models import SettingsRevision
from memories.services.configuration import project_settings_update
from memories.services.revisions import Actor
from tests.console.operators import operator_client

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project)


def section_url(tenant, section):
    return reverse("console-settings-section", args=[tenant.project.pk, section])


def overridden(tenant, **search):
    project_settings_update(
        project=tenant.project, changes={"search": search}, actor=Actor.operator("olga")
    )


def test_a_set_setting_offers_its_reset_with_its_default(owner, editor):
    overridden(owner, rrf_k=40)
    html = editor.get(reverse("console-settings", args=[owner.project.pk])).content.decode()
    assert html.count("Reset to default</button>") == 1
    assert '"reset": "rrf_k"' in html and "Default: <code>60</code>" in html
    viewer = operator_client("vic", project=owner.project, role="viewer")
    read_only = viewer.get(reverse("console-settings", args=[owner.project.pk])).content.decode()
    assert "Reset to default</button>" not in read_only


def test_reset_removes_the_override_and_is_recorded(owner, editor):
    overridden(owner, rrf_k=40, keyword_weight=0.7)
    response = editor.post(section_url(owner, "search"), {"reset": "rrf_k"}, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "search.rrf_k is back at its default." in html
    owner.project.refresh_from_db()
    assert owner.project.settings == {"search": {"keyword_weight": 0.7}}
    latest = SettingsRevision.objects.filter(project=owner.project).latest("created_at")
    assert (latest.actor, latest.before["search"]["rrf_k"]) == ("erin", 40)
    assert "rrf_k" not in latest.after["search"]
    assert owner.client.get("/api/v1/settings/").json()["values"]["search"]["rrf_k"] == 60


def test_a_save_swaps_in_the_recent_changes_with_their_diff(owner, editor):
    overridden(owner, rrf_k=40)
    html = editor.post(section_url(owner, "search"), {"reset": "rrf_k"}, **HTMX).content.decode()
    recent = html[html.index('id="recent-changes"') :]
    assert 'hx-swap-oob="true"' in html[html.index('<section class="card" id="recent-changes"') :]
    assert recent.index("<strong>erin</strong>") < recent.index("<strong>olga</strong>")
    assert '<th scope="row">search.rrf_k</th>' in recent and '<td class="before">40</td>' in recent


def test_a_bad_reset_is_named_and_changes_nothing(owner, editor):
    overridden(owner, rrf_k=40)
    response = editor.post(section_url(owner, "search"), {"reset": "nope"}, **HTMX)
    assert response.status_code == 422 and "reset: search has no setting" in response.text
    assert SettingsRevision.objects.count() == 1
    viewer = operator_client("vic", project=owner.project, role="viewer")
    assert viewer.post(section_url(owner, "search"), {"reset": "rrf_k"}).status_code == 403
    owner.project.refresh_from_db()
    assert owner.project.settings == {"search": {"rrf_k": 40}}


def test_resetting_a_default_records_nothing(owner, editor):
    response = editor.post(section_url(owner, "search"), {"reset": "rrf_k"}, **HTMX)
    assert response.status_code == 200 and "back at its default" not in response.text
    assert not SettingsRevision.objects.exists()
