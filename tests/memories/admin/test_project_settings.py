"""The admin edits a project's settings through the same validation, recorded."""

from __future__ import annotations

import json

from memories.models import SettingsRevision


def inline_management(*prefixes: str) -> dict[str, str]:
    """The management forms of empty inline formsets, which every admin POST carries."""
    data = {}
    for prefix in prefixes:
        data |= {
            f"{prefix}-TOTAL_FORMS": "0",
            f"{prefix}-INITIAL_FORMS": "0",
            f"{prefix}-MIN_NUM_FORMS": "0",
            f"{prefix}-MAX_NUM_FORMS": "1000",
        }
    return data


def _post(admin_client, project, settings):  # type: ignore[no-untyped-def]
    return admin_client.post(
        f"/admin/memories/project/{project.pk}/change/",
        {
            "name": project.name,
            "settings": json.dumps(settings),
            **inline_management("memberships", "settings_revisions"),
        },
    )


def test_the_admin_changes_settings_as_the_operator(admin_client, owner):
    response = _post(admin_client, owner.project, {"search": {"keyword_weight": 0.9}})
    assert response.status_code == 302
    owner.project.refresh_from_db()
    assert owner.project.settings == {"search": {"keyword_weight": 0.9}}
    [revision] = SettingsRevision.objects.filter(project=owner.project)
    assert (revision.actor_type, revision.actor) == ("operator", "admin")
    assert (revision.before, revision.after) == ({}, owner.project.settings)
    page = admin_client.get(f"/admin/memories/project/{owner.project.pk}/change/")
    assert b"Effective settings" in page.content
    assert b"&quot;keyword_weight&quot;: 0.9" in page.content


def test_the_admin_refuses_a_bad_setting_naming_it(admin_client, owner):
    response = _post(admin_client, owner.project, {"search": {"keyword_weight": 3}})
    assert response.status_code == 200  # the form again, with the error
    assert b"search.keyword_weight: Must be at most 1.0." in response.content
    owner.project.refresh_from_db()
    assert owner.project.settings == {}
    assert not SettingsRevision.objects.filter(project=owner.project).exists()
