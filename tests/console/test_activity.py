"""The console's Activity log: memory, settings, synopsis and team changes merged
newest first, each with who, when, intent and a field-level diff; erased text never
shown (its SHA-256 is); filters; keyset pages without gaps or repeats; viewers read;
another project's changes never shown."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse
from django.utils import timezone

from memories.models import EndUser, Memory, MemoryRevision, Project, Room, SettingsRevision
from memories.services.configuration import project_settings_update, room_settings_update
from memories.services.memories import memory_update
from memories.services.revisions import Actor
from memories.services.synopsis import synopsis_part_edit
from tests.console.operators import operator_client

HTMX = {"HTTP_HX_REQUEST": "true"}
ERIN = Actor.operator("erin")


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project)


def url(tenant):
    return reverse("console-activity", args=[tenant.project.pk])


def remember(tenant, text, user="maria", kind="fact"):
    body = {"user": user, "kind": kind, "content": text}
    response = tenant.client.post("/api/v1/memories/", body, format="json")
    assert response.status_code == 201, response.content
    return Memory.objects.get(public_id=response.json()["memory"]["id"])


def log(client, tenant, **params):
    response = client.get(url(tenant), params, **HTMX)
    assert response.status_code == 200
    return response.content.decode()


def test_every_kind_of_change_newest_first_with_its_diff(owner, editor):
    tea = remember(owner, "likes green tea")
    memory_update(memory=tea, changes={"content": "likes black tea"}, actor=ERIN, intent="restore")
    project_settings_update(project=owner.project, changes={"search": {"rrf_k": 40}}, actor=ERIN)
    maria = EndUser.objects.get(project=owner.project, external_id="maria")
    synopsis_part_edit(end_user=maria, part="identity", text="Maria, a pianist.", actor=ERIN)
    html = editor.get(url(owner)).content.decode()
    order = [
        html.index(text)
        for text in (
            "synopsis identity of maria",
            "search.rrf_k",
            "likes black tea",
            owner.key.prefix,
        )
    ]
    assert order == sorted(order)  # newest first
    assert "Maria, a pianist." in html and '<span class="tag intent intent-restore">' in html
    update = html[html.index("likes black tea") - 600 : html.index("likes black tea") + 200]
    assert "likes green tea" in update  # before and after of the changed field only
    assert "importance" not in update.split("<tbody>")[1]
    history = reverse("console-memory-history", args=[owner.project.pk, maria.pk, tea.pk])
    assert history in html  # the memory exists: its history is a click away


def test_erased_text_is_never_shown_only_its_sha256(owner, editor):
    text = "my card number is 4111 1111"
    memory = remember(owner, text)
    assert owner.client.delete(f"/api/v1/memories/{memory.public_id}/").status_code == 204
    html = editor.get(url(owner)).content.decode()
    assert "4111" not in html
    assert html.count("erased (text not kept)") == 2  # the create's and the delete's
    assert hashlib.sha256(text.encode()).hexdigest() in html
    assert 'class="history-link"' not in html  # the memory is gone: no history to open


def test_long_values_fold_to_one_line_with_expand(owner, editor):
    remember(owner, "word " * 100)
    html = editor.get(url(owner)).content.decode()
    assert '<details class="memory-long"><summary>' in html


def test_filters_narrow_the_log_and_bad_ones_are_named(owner, editor):
    tea = remember(owner, "likes green tea")
    remember(owner, "went to Porto", user="bob", kind="goal")
    memory_update(memory=tea, changes={"importance": 0.9}, actor=ERIN, intent="bulk")
    project_settings_update(project=owner.project, changes={"search": {"rrf_k": 40}}, actor=ERIN)
    by_erin = log(editor, owner, actor="erin")
    assert "search.rrf_k" in by_erin and "went to Porto" not in by_erin
    keys = log(editor, owner, actor_type="api_key")
    assert "went to Porto" in keys and "search.rrf_k" not in keys
    assert "search.rrf_k" in log(editor, owner, action="settings")
    bulk = log(editor, owner, intent="bulk")
    assert "importance" in bulk and "went to Porto" not in bulk and "rrf_k" not in bulk
    goals = log(editor, owner, kind="goal")
    assert "went to Porto" in goals and "green tea" not in goals
    bob = log(editor, owner, user="bob")
    assert "went to Porto" in bob and "green tea" not in bob and "rrf_k" not in bob
    tomorrow = (timezone.now() + timedelta(days=1)).date().isoformat()
    assert "No change matches" in log(editor, owner, since=tomorrow)
    assert "went to Porto" in log(editor, owner, until=tomorrow)
    for params, named in [
        ({"action": "explode"}, "action:"),
        ({"since": "yesterday"}, "since:"),
        ({"user": "nobody"}, "user:"),
        ({"cursor": "junk"}, "cursor:"),
    ]:
        html = log(editor, owner, **params)
        assert named in html and "went to Porto" in html  # shown without the bad filter


def test_keyset_pages_neither_repeat_nor_skip_at_one_instant(owner, editor):
    now = timezone.now()
    memory = remember(owner, "a fact")
    MemoryRevision.objects.all().update(created_at=now)
    MemoryRevision.objects.bulk_create(
        MemoryRevision(
            project=owner.project,
            memory_id=memory.pk,
            memory_public_id=memory.public_id,
            action="update",
            actor_type="operator",
            actor=f"op{n:03}",
            before={"importance": 0.5},
            after={"importance": 0.6},
            created_at=now,
        )
        for n in range(70)
    )
    SettingsRevision.objects.bulk_create(
        SettingsRevision(
            project=owner.project,
            actor_type="operator",
            actor=f"set{n:03}",
            before={},
            after={"search": {"rrf_k": n}},
            created_at=now,
        )
        for n in range(40)
    )
    seen, cursor, pages = [], None, 0
    while True:
        params = {"cursor": cursor} if cursor else {}
        html = log(editor, owner, **params)
        seen += [part.split("</strong>")[0] for part in html.split('<span class="actor">')[1:]]
        pages += 1
        if "Older changes" not in html:
            break
        cursor = html.split("cursor=")[1].split('"')[0]
    assert pages == 3 and len(seen) == 111 and len(set(seen)) == 111


def test_viewers_read_and_other_projects_stay_apart(owner, outsider, editor):
    remember(outsider, "their secret")
    viewer = operator_client("vic", project=owner.project, role="viewer")
    assert "their secret" not in viewer.get(url(owner)).content.decode()
    assert editor.get(url(outsider)).status_code == 404
    assert editor.post(url(owner)).status_code == 405


def test_team_changes_and_the_admins_edits_of_the_project_are_told_apart(owner, editor):
    root = operator_client("root", superuser=True)
    LogEntry.objects.create(  # what the admin writes when the project is edited there
        user=root.user,
        content_type=ContentType.objects.get_for_model(Project),
        object_id=str(owner.project.pk),
        object_repr=owner.project.name,
        action_flag=CHANGE,
        change_message='[{"changed": {"fields": ["Name"]}}]',
    )
    editor.post(
        reverse("console-team-add", args=[owner.project.pk]),
        {"username": "nadia", "email": "nadia@example.org", "role": "viewer"},
    )
    html = log(editor, owner)
    assert "added nadia (a new operator) as viewer" in html and "Changed Name." in html
    team = log(editor, owner, action="team")
    assert "added nadia" in team and "Changed Name." not in team
    admin = log(editor, owner, action="admin")
    assert "added nadia" not in admin and "Changed Name." in admin


def test_a_rooms_settings_change_is_in_the_log(owner, editor):
    room = Room.objects.create(project=owner.project, external_id="kitchen")
    room_settings_update(room=room, changes={"buffer": {"max_size": 20}}, actor=ERIN)
    html = log(editor, owner, action="settings")
    assert "room kitchen&#x27;s settings" in html and "buffer.max_size" in html
