"""The console's user page: header, rooms and their messages, the memory list with its
filters and pages, the live search fragment (marks, escaping, explain), tenants and the
number of queries for a user of many memories."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from memories.models import EndUser, Membership, Memory, content_hash
from tests.conftest import embed_pending

HTMX = {"HTTP_HX_REQUEST": "true"}


def operator_client(project, username, role=Membership.Role.EDITOR):
    """A Django test client logged in as an operator with this role in ``project``
    (role None: no membership)."""
    user = get_user_model().objects.create_user(username=username, password="x")
    if role is not None:
        Membership.objects.create(user=user, project=project, role=role)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def editor(owner):
    return operator_client(owner.project, "erin")


def write(tenant, *items):
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": list(items)})
    assert response.status_code == 201, response.json()
    return [row["memory"]["id"] for row in response.json()["results"]]


def maria_of(owner):
    return EndUser.objects.get(project=owner.project, external_id="maria")


@pytest.fixture
def maria(owner):
    """Maria: two rooms of messages, a fact, a goal; Bob: one message."""
    write(
        owner,
        {
            "user": "maria",
            "room": "kitchen",
            "role": "user",
            "content": "I adopted a cat called Miso",
        },
        {"user": "maria", "room": "kitchen", "role": "assistant", "content": "What a lovely name!"},
        {"user": "maria", "room": "garden", "role": "user", "content": "The tomatoes are ripe"},
        {"user": "maria", "kind": "fact", "content": "Maria has a cat named Miso"},
        {"user": "maria", "kind": "goal", "content": "Plant basil in spring"},
        {"user": "bob", "room": "kitchen", "role": "user", "content": "Bob likes dogs"},
    )
    return maria_of(owner)


def url(name, owner, user, *rest):
    return reverse(name, args=[owner.project.pk, user.pk, *rest])


def test_the_overview_shows_who_she_is_her_rooms_and_latest_memories(owner, editor, maria):
    response = editor.get(url("console-user", owner, maria))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>maria" in html
    assert "5</strong> memories" in html
    for badge in ("3 messages</span>", "1 fact</span>", "1 goal</span>"):
        assert badge in html
    assert "5 waiting for embedding" in html
    # her rooms, the most recently active first: garden, then kitchen
    assert html.index(">garden</a>") < html.index(">kitchen</a>")
    assert html.count('<article class="memory') == 5  # the latest five
    assert "Bob likes dogs" not in html
    # the tabs, each its own URL; this one marked
    tabs = html.split('aria-label="This user"', 1)[1].split("</nav>", 1)[0]
    assert 'aria-current="page">Overview</a>' in tabs
    for name in ("console-user-memories", "console-user-context", "console-user-synopsis"):
        assert f'href="{url(name, owner, maria)}"' in tabs


def test_the_memories_tab_lists_every_memory_and_searches_as_you_type(owner, editor, maria):
    html = editor.get(url("console-user-memories", owner, maria)).content.decode()
    assert html.count('<article class="memory') == 5
    assert "Bob likes dogs" not in html
    assert 'hx-trigger="input changed delay:300ms, search"' in html
    assert 'aria-current="page">Memories</a>' in html


def test_a_room_fragment_lists_its_messages_in_order_with_role_and_time(owner, editor, maria):
    kitchen = maria.memories.get(content__startswith="I adopted").room
    response = editor.get(url("console-user-room", owner, maria, kitchen.pk), **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html
    # oldest first; another user's turn in the room is shown with the speaker's id
    assert (
        html.index("I adopted a cat") < html.index("What a lovely name") < html.index("Bob likes")
    )
    assert '<span class="role">assistant</span>' in html
    assert '<span class="speaker">bob</span>' in html
    assert "<time datetime=" in html


def test_the_newest_page_of_messages_comes_first_and_is_full(owner, editor, maria):
    start = timezone.now() - timedelta(days=1)
    write(
        owner,
        *[
            {
                "user": "maria",
                "room": "long",
                "role": "user",
                "content": f"turn {i:03}",
                "created_at": (start + timedelta(seconds=i)).isoformat(),
            }
            for i in range(120)
        ],
    )
    room = maria.memories.get(content="turn 000").room
    room_url = url("console-user-room", owner, maria, room.pk)
    newest = editor.get(room_url, **HTMX).content.decode()
    assert "page 3 of 3" in newest
    assert "turn 070" in newest and "turn 119" in newest and "turn 069" not in newest
    assert newest.index("turn 070") < newest.index("turn 119")
    oldest = editor.get(room_url + "?page=1", **HTMX).content.decode()
    assert "turn 000" in oldest and "turn 019" in oldest and "turn 020" not in oldest


def test_a_room_she_is_not_in_is_a_404(owner, editor, maria):
    write(owner, {"user": "bob", "room": "office", "content": "Bob's room"})
    office = EndUser.objects.get(external_id="bob").memories.get(content="Bob's room").room
    response = editor.get(url("console-user-room", owner, maria, office.pk))
    assert response.status_code == 404


def test_the_list_filters_by_kind_status_and_dates(owner, editor, maria):
    old = Memory.objects.get(content="Plant basil in spring")
    old.created_at = timezone.now() - timedelta(days=40)
    old.status = Memory.Status.ARCHIVED
    old.save()
    page = url("console-user-memories", owner, maria)

    def shown(**params):
        response = editor.get(page, params, **HTMX)
        assert response.status_code == 200
        html = response.content.decode()
        assert "<html" not in html  # the #memories fragment
        return html

    facts = shown(kind="fact")
    assert "Maria has a cat named Miso" in facts and "1 memory," in facts
    assert "The tomatoes are ripe" not in facts
    archived = shown(status="archived")
    assert "Plant basil" in archived and "1 memory," in archived
    recent = shown(start=(timezone.now() - timedelta(days=7)).date().isoformat())
    assert "Plant basil" not in recent and "4 memories," in recent
    until = shown(end=(timezone.now() - timedelta(days=30)).date().isoformat())
    assert "Plant basil" in until and "1 memory," in until
    nothing = shown(kind="summary")
    assert "No memory matches these filters." in nothing


def test_a_date_range_backwards_is_a_field_error_in_place(owner, editor, maria):
    response = editor.get(
        url("console-user-memories", owner, maria),
        {"start": "2025-05-02", "end": "2025-05-01"},
        **HTMX,
    )
    assert "to: Must be on or after the start date." in response.content.decode()


def test_the_list_is_paginated_newest_first(owner, editor, maria):
    start = timezone.now() + timedelta(minutes=1)
    write(
        owner,
        *[
            {
                "user": "maria",
                "kind": "fact",
                "content": f"fact {i:03}",
                "created_at": (start + timedelta(seconds=i)).isoformat(),
            }
            for i in range(120)
        ],
    )
    page = url("console-user-memories", owner, maria)
    first = editor.get(page, {"kind": "fact"}, **HTMX).content.decode()
    assert "121 memories" in first and "page 1 of 3" in first
    assert "fact 119" in first and "fact 070" in first and "fact 069" not in first
    assert "?kind=fact&amp;page=2" in first  # the filters stay in the pages' links
    last = editor.get(page, {"kind": "fact", "page": "3"}, **HTMX).content.decode()
    assert "Maria has a cat named Miso" in last and "fact 019" in last
    junk = editor.get(page, {"kind": "fact", "page": "99"}, **HTMX).content.decode()
    assert "page 3 of 3" in junk


def test_search_marks_the_query_words_and_escapes_the_text(owner, editor, maria):
    write(owner, {"user": "maria", "content": "<b>Cats</b> & dogs: my cat sleeps"})
    response = editor.get(
        url("console-user-search", owner, maria), {"q": "cats", "mode": "keyword"}, **HTMX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "&lt;b&gt;<mark>Cats</mark>&lt;/b&gt; &amp; dogs: my <mark>cat</mark> sleeps" in html
    assert "<b>Cats</b>" not in html
    assert "I adopted a <mark>cat</mark> called Miso" in html
    assert "Bob likes" not in html  # only her memories
    assert "in keyword mode" in html
    # the per-signal scores, one click away
    assert '<details class="explain">' in html and "keyword rank" in html


@pytest.mark.parametrize("mode", ["auto", "vector", "hybrid"])
def test_search_in_every_mode_finds_by_meaning(owner, editor, maria, mode):
    embed_pending()
    response = editor.get(
        url("console-user-search", owner, maria), {"q": "her pet", "mode": mode}, **HTMX
    )
    html = response.content.decode()
    assert f"in {mode} mode" in html
    assert (
        "Miso" in html.split('<article class="memory', 2)[1].split("</article>")[0]
    )  # the first result is about the cat
    assert "vector similarity" in html


def test_an_empty_query_shows_how_to_search(owner, editor, maria):
    response = editor.get(url("console-user-search", owner, maria), {"q": "  "}, **HTMX)
    assert "Type to search this user’s memories" in response.content.decode()


def test_a_script_memory_is_text(owner, editor, maria):
    write(
        owner,
        {
            "user": "maria",
            "content": "<script>alert(1)</script>",
            "metadata": {"note": "<img src=x onerror=alert(2)>"},
        },
    )
    html = editor.get(url("console-user", owner, maria)).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html
    write(owner, {"user": "maria", "content": "Maria pasted <script>alert(3)</script>"})
    search = editor.get(url("console-user-search", owner, maria), {"q": "pasted"}, **HTMX)
    found = search.content.decode()
    assert "<mark>pasted</mark> &lt;script&gt;alert(3)&lt;/script&gt;" in found
    assert "<script>alert" not in found


def test_another_projects_user_is_a_404(owner, outsider, editor):
    write(outsider, {"user": "maria", "room": "r", "content": "outsider's maria"})
    theirs = EndUser.objects.get(project=outsider.project)
    for name in ("console-user", "console-user-search"):
        assert editor.get(url(name, owner, theirs)).status_code == 404
    # their project in the URL: no membership, so no such project either
    assert (
        editor.get(reverse("console-user", args=[outsider.project.pk, theirs.pk])).status_code
        == 404
    )


def test_without_a_membership_nothing_is_shown(owner, maria):
    stranger = operator_client(owner.project, "sam", role=None)
    assert stranger.get(url("console-user", owner, maria)).status_code == 404
    response = Client().get(url("console-user", owner, maria))
    assert response.status_code == 302  # to the login


def test_a_viewer_reads_without_the_buttons_that_change(owner, maria):
    viewer = operator_client(owner.project, "victor", Membership.Role.VIEWER)
    html = viewer.get(url("console-user", owner, maria)).content.decode()
    assert "Maria has a cat named Miso" in html
    assert ">Edit<" not in html and ">Pin<" not in html and "Forget" not in html
    assert ">History<" in html


def _bulk(owner, user, n):
    room = owner.project.rooms.create(external_id=f"room-{user.external_id}")
    now = timezone.now()
    Memory.objects.bulk_create(
        Memory(
            project=owner.project,
            end_user=user,
            room=room,
            role="user",
            kind=Memory.Kind.MESSAGE if i % 4 else Memory.Kind.FACT,
            content=f"memory {i}",
            content_hash=content_hash(f"memory {i}"),
            metadata={"i": i},
            created_at=now - timedelta(minutes=i),
        )
        for i in range(n)
    )


def test_the_page_costs_the_same_queries_for_many_memories(
    owner, editor, django_assert_max_num_queries
):
    few = owner.project.end_users.create(external_id="few")
    many = owner.project.end_users.create(external_id="many")
    _bulk(owner, few, 3)
    _bulk(owner, many, 2_000)
    counts = {}
    for user in (few, many):
        for tab in ("console-user", "console-user-memories"):
            with CaptureQueriesContext(connection) as captured:
                assert editor.get(url(tab, owner, user)).status_code == 200
            counts[user.external_id, tab] = len(captured)
    for tab in ("console-user", "console-user-memories"):
        assert counts["few", tab] == counts["many", tab]
    with django_assert_max_num_queries(12):
        editor.get(url("console-user", owner, many))
    with django_assert_max_num_queries(12):
        editor.get(url("console-user-memories", owner, many))
    with django_assert_max_num_queries(8):
        page = url("console-user-memories", owner, many)
        editor.get(page, {"kind": "fact", "page": "5"}, **HTMX)
    with django_assert_max_num_queries(12):
        editor.get(url("console-user-search", owner, many), {"q": "memory 7", "mode": "keyword"})


def test_the_overview_lists_her_ten_latest_rooms_and_counts_the_rest(owner, editor, maria):
    write(
        owner,
        *[{"user": "maria", "room": f"session-{i:02}", "content": f"hello {i}"} for i in range(10)],
    )
    html = editor.get(url("console-user", owner, maria)).content.decode()
    rooms = html.split('id="rooms-title"', 1)[1].split("</section>", 1)[0]
    assert rooms.count("<tr><td>") == 10
    assert "2 older rooms" in rooms  # 12 rooms: the 10 most recent are listed
