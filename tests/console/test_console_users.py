"""The console's users list: memory and room counts, last activity, search, sort,
pagination, scoping; the HTMX fragment."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from console.services.overview import USERS_PER_PAGE
from memories.models import EndUser, Memory, Room
from tests.console.operators import operator_client


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project, role="editor")


def users_url(tenant) -> str:
    return f"/dashboard/p/{tenant.project.pk}/users/"


def ids(response) -> list[str]:
    return [user.external_id for user in response.context["listing"].page.object_list]


@pytest.fixture
def people(owner, outsider):
    """maria: 3 memories in 2 rooms, newest 1 h ago; omar: 1, 3 days ago; zoe: none.
    The outsider's project has a maria too."""
    now = timezone.now()
    project = owner.project
    maria = EndUser.objects.create(project=project, external_id="maria", name="María López")
    omar = EndUser.objects.create(project=project, external_id="omar", name="Omar Haddad")
    EndUser.objects.create(project=project, external_id="zoe", name="Zoë")
    rooms = [Room.objects.create(project=project, external_id=f"r{i}") for i in range(2)]
    for user, room, hours in [
        (maria, rooms[0], 1),
        (maria, rooms[0], 5),
        (maria, rooms[1], 9),
        (omar, rooms[1], 72),
    ]:
        Memory.objects.create(
            project=project,
            end_user=user,
            room=room,
            content="x",
            content_hash="h",
            created_at=now - timedelta(hours=hours),
        )
    other = EndUser.objects.create(project=outsider.project, external_id="maria-elsewhere")
    Memory.objects.create(project=outsider.project, end_user=other, content="x", content_hash="h")


def test_counts_rooms_and_last_activity(owner, editor, people):
    response = editor.get(users_url(owner))
    assert response.status_code == 200
    rows = {user.external_id: user for user in response.context["listing"].page.object_list}
    assert set(rows) == {"maria", "omar", "zoe"}  # not the other project's
    assert (rows["maria"].memory_count, rows["maria"].room_count) == (3, 2)
    assert (rows["omar"].memory_count, rows["omar"].room_count) == (1, 1)
    assert (rows["zoe"].memory_count, rows["zoe"].room_count, rows["zoe"].last_activity) == (
        0,
        0,
        None,
    )
    assert timezone.now() - rows["maria"].last_activity < timedelta(hours=2)
    assert "maria-elsewhere" not in response.content.decode()


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("-activity", ["maria", "omar", "zoe"]),  # the default; no activity last
        ("activity", ["omar", "maria", "zoe"]),
        ("-memories", ["maria", "omar", "zoe"]),
        ("memories", ["zoe", "omar", "maria"]),
        ("external_id", ["maria", "omar", "zoe"]),
        ("-external_id", ["zoe", "omar", "maria"]),
    ],
)
def test_sorts(owner, editor, people, sort, expected):
    assert ids(editor.get(users_url(owner), {"sort": sort})) == expected


def test_an_unknown_sort_is_the_default(owner, editor, people):
    response = editor.get(users_url(owner), {"sort": "password"})
    assert response.status_code == 200 and ids(response) == ["maria", "omar", "zoe"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [("MAR", ["maria", "omar"]), ("lópez", ["maria"]), ("zoë", ["zoe"]), ("nobody", [])],
)
def test_search_by_external_id_or_name(owner, editor, people, query, expected):
    response = editor.get(users_url(owner), {"q": query})
    assert ids(response) == expected
    if not expected:
        assert "No user matches" in response.content.decode()


def test_pagination(owner, editor):
    EndUser.objects.bulk_create(
        [EndUser(project=owner.project, external_id=f"u{i:03d}") for i in range(USERS_PER_PAGE + 5)]
    )
    first = editor.get(users_url(owner), {"sort": "external_id"})
    assert len(ids(first)) == USERS_PER_PAGE and ids(first)[0] == "u000"
    assert "Page 1 of 2" in first.content.decode()
    assert 'href="?sort=external_id&amp;page=2"' in first.content.decode()
    second = editor.get(users_url(owner), {"sort": "external_id", "page": 2})
    assert ids(second) == [f"u{i:03d}" for i in range(USERS_PER_PAGE, USERS_PER_PAGE + 5)]
    assert ids(editor.get(users_url(owner), {"sort": "external_id", "page": 99})) == ids(second)


def test_the_sort_links_keep_the_search(owner, editor):
    EndUser.objects.create(project=owner.project, external_id="a b&c d")
    html = editor.get(users_url(owner), {"q": "a b&c"}).content.decode()
    assert 'href="?q=a+b%26c&amp;sort=external_id"' in html


def test_htmx_search_gets_only_the_results(owner, editor, people):
    response = editor.get(
        users_url(owner), {"q": "omar"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="user-results"
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="user-results">') and "<html" not in html
    assert "omar" in html and "maria" not in html


def test_names_are_escaped(owner, editor):
    EndUser.objects.create(project=owner.project, external_id="<b>x</b>", name="<script>1</script>")
    html = editor.get(users_url(owner)).content.decode()
    assert "<script>1</script>" not in html and "&lt;script&gt;1&lt;/script&gt;" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html


def test_viewers_see_the_list(owner, people):
    viewer = operator_client("victor", project=owner.project, role="viewer")
    assert ids(viewer.get(users_url(owner))) == ["maria", "omar", "zoe"]


def test_another_projects_list_is_404(outsider, editor):
    assert editor.get(users_url(outsider)).status_code == 404
