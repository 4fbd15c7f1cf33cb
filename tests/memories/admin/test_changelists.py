"""Every model of the two apps is in the admin, and each list and page renders with
data, escaped; the memory list's filters and search find what they say, in a bounded
number of queries whatever the number of rows."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.apps import apps
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.admin import base
from memories.models import Agent, ApiKey, Memory, MemoryRevision, Project
from memories.services.memories import MemoryInput
from tests.memories.admin.conftest import write

LIST = "/admin/memories/memory/"


def admin_url(model: type, action: str = "changelist", pk: object = None) -> str:
    opts = model._meta
    base_url = f"/admin/{opts.app_label}/{opts.model_name}/"
    return base_url if action == "changelist" else f"{base_url}{pk}/{action}/"


def listed_ids(page) -> set[str]:  # type: ignore[no-untyped-def]
    """The ids of the memories a changelist page shows (their action checkboxes)."""
    return set(re.findall(r'name="_selected_action" value="([^"]+)"', page.content.decode()))


def test_every_model_of_the_two_apps_is_registered() -> None:
    models = [*apps.get_app_config("memories").get_models(),
              *apps.get_app_config("synopsis").get_models()]  # fmt: skip
    assert [m.__name__ for m in models if m not in admin.site._registry] == []
    assert len(models) >= 17


def test_every_list_and_page_renders_with_data(admin_client, owner, world):
    rows = {**world.rows, Memory: world.memories[2], Project: owner.project, ApiKey: owner.key,
            Agent: Agent.objects.create(project=owner.project, external_id="bot")}  # fmt: skip
    for model, row in rows.items():
        listing = admin_client.get(admin_url(model))
        assert listing.status_code == 200, model
        assert f"/{row.pk}/change/" in listing.content.decode(), model
        page = admin_client.get(admin_url(model, "change", row.pk))
        assert page.status_code == 200, model


def test_a_script_memory_is_shown_as_text_everywhere(admin_client, owner, world):
    memory, revision = world.memories[2], world.rows[MemoryRevision]
    pages = [
        admin_client.get(LIST),
        admin_client.get(admin_url(Memory, "change", memory.pk)),
        admin_client.get(admin_url(MemoryRevision)),
        admin_client.get(admin_url(MemoryRevision, "change", revision.pk)),
    ]
    for page in pages:
        html = page.content.decode()
        assert "<script>alert" not in html
        assert "&lt;script&gt;alert(" in html


def test_the_filters_narrow_the_list(admin_client, owner, outsider, world):
    other = write(outsider.project, MemoryInput(content="Elsewhere", user="maria"))[0]
    maria_message, maria_fact, bob = (str(m.pk) for m in world.memories)
    Memory.objects.filter(pk=maria_fact).update(
        status="archived", pinned=True, embedding_status="done",
        created_at=timezone.now() - timedelta(days=40),
    )  # fmt: skip
    cases = {
        (): {maria_message, maria_fact, bob, str(other.pk)},
        (("project__id__exact", owner.project.pk),): {maria_message, maria_fact, bob},
        (("user", "maria"),): {maria_message, maria_fact, str(other.pk)},
        (("user", "maria"), ("project__id__exact", owner.project.pk)): {maria_message,
                                                                         maria_fact},
        (("room", "chat-2"),): {bob},
        (("kind__exact", "fact"),): {maria_fact},
        (("status__exact", "archived"),): {maria_fact},
        (("embedding_status__exact", "pending"),): {maria_message, bob, str(other.pk)},
        (("pinned__exact", "1"),): {maria_fact},
        (("role__exact", "user"),): {maria_message, bob},
        (("created_at__gte", str(timezone.localtime() - timedelta(days=7))),):
            {maria_message, bob, str(other.pk)},
    }  # fmt: skip
    for params, expected in cases.items():
        page = admin_client.get(LIST, dict(params))
        assert page.status_code == 200, params
        assert listed_ids(page) == expected, params


def test_the_user_filter_keeps_the_other_filters(admin_client, owner, world):
    page = admin_client.get(LIST, {"user": "maria", "kind__exact": "fact"})
    html = page.content.decode()
    assert 'name="user" value="maria"' in html
    assert '<input type="hidden" name="kind__exact" value="fact">' in html


def test_search_finds_words_external_ids_and_ids(admin_client, owner, world):
    maria_message, maria_fact, bob = (str(m.pk) for m in world.memories)
    cases = {
        "peanut": {maria_message},  # full text: stemmed, as the API's keyword search
        "lisbon maria": {maria_fact},
        '"lives in lisbon"': {maria_fact},
        "maria": {maria_message, maria_fact},  # the word, and the user's external id
        "bob": {bob},  # an external id only
        "chat-1": {maria_message},  # a room's external id
        maria_fact: {maria_fact},  # an id
        "nothing-like-this": set(),
    }
    for term, expected in cases.items():
        page = admin_client.get(LIST, {"q": term})
        assert page.status_code == 200, term
        assert listed_ids(page) == expected, term


def test_the_memory_list_runs_a_bounded_number_of_queries(
    admin_client, owner, django_assert_max_num_queries
):
    def seed(count: int, batch: int) -> None:
        write(owner.project, *[
            MemoryInput(content=f"turn {i}", user=f"user-{batch}-{i % 50}",
                        room=f"room-{batch}-{i % 50}",
                        role="user", created_at=timezone.now() - timedelta(seconds=i))
            for i in range(count)
        ])  # fmt: skip

    seed(200, batch=1)
    with django_assert_max_num_queries(8):
        page = admin_client.get(LIST)
    # the first page: the newest 100, newest first (ids first, then the rows)
    newest = Memory.objects.order_by("-created_at").values_list("pk", flat=True)[:100]
    shown = re.findall(r'name="_selected_action" value="([^"]+)"', page.content.decode())
    assert shown == [str(pk) for pk in newest]
    assert b"user-1-49" in page.content and b"room-1-49" in page.content

    def queries(params: dict[str, object]) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(LIST, params).status_code == 200
        return len(captured)

    before = [queries({}), queries({"p": 2}), queries({"project__id__exact": owner.project.pk})]
    seed(200, batch=2)  # twice the rows, users and rooms: the same queries
    assert [queries({}), queries({"p": 2}), queries({"project__id__exact": owner.project.pk})] == (
        before
    )


def test_the_list_never_counts_a_whole_table(admin_client, owner, monkeypatch):
    write(owner.project, *[MemoryInput(content=f"note {i}") for i in range(12)])
    monkeypatch.setattr(base, "EXACT_COUNT_LIMIT", 5)
    with CaptureQueriesContext(connection) as captured:
        page = admin_client.get(LIST)
    counts = [q["sql"] for q in captured if "COUNT(" in q["sql"] and "memories_memory" in q["sql"]]
    assert counts and all("LIMIT 6" in sql for sql in counts)
    assert any(q["sql"].startswith("EXPLAIN (FORMAT JSON)") for q in captured)
    paginator = page.context["cl"].paginator
    assert paginator.count >= 6  # the planner's estimate, at least what was counted


@pytest.mark.parametrize("count", [0, 3])
def test_small_lists_are_counted_exactly(admin_client, owner, count):
    write(owner.project, *[MemoryInput(content=f"note {i}") for i in range(count)])
    page = admin_client.get(LIST)
    assert page.context["cl"].result_count == count


def test_the_revision_list_cuts_long_values_and_its_page_shows_them_whole(admin_client, owner):
    text = "word " * 100
    memory = write(owner.project, MemoryInput(content=text))[0]
    revision = MemoryRevision.objects.get(memory_id=memory.pk)
    listing = admin_client.get(admin_url(MemoryRevision), {"q": str(memory.pk)}).content.decode()
    assert "&quot;word word" in listing and "…" in listing and text.strip() not in listing
    page = admin_client.get(admin_url(MemoryRevision, "change", revision.pk)).content.decode()
    assert text.strip() in page
