"""The console's project pages: list and scoping, overview and its chart, API keys,
configuration; viewers read, editors change, outsiders get 404."""

from __future__ import annotations

import re
import time
import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from memories.models import ApiKey, Memory, ParkedTask, Project, SettingsRevision
from memories.services import workers
from memories.services.workers import worker_heartbeat
from tests.console.operators import operator_client


def project_url(project: Project, tail: str = "") -> str:
    return f"/dashboard/p/{project.pk}/{tail}"


def remember(tenant, *texts, user="alice", room="r1", created_at=None):
    items = [{"user": user, "room": room, "content": text} for text in texts]
    if created_at is not None:
        for item in items:
            item["created_at"] = created_at.isoformat()
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": items})
    assert response.status_code == 201, response.json()


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project, role="editor")


@pytest.fixture
def viewer(owner):
    return operator_client("victor", project=owner.project, role="viewer")


# --- who sees what -----------------------------------------------------------------


def test_the_project_list_shows_only_memberships(owner, outsider, editor):
    page = editor.get("/dashboard/").content.decode()
    assert owner.project.name in page and "editor" in page
    assert f"/dashboard/p/{outsider.project.pk}/" not in page


def test_a_superuser_sees_every_project(owner, outsider):
    root = operator_client("root", superuser=True)
    page = root.get("/dashboard/").content.decode()
    assert f"/dashboard/p/{owner.project.pk}/" in page
    assert f"/dashboard/p/{outsider.project.pk}/" in page
    assert root.get(project_url(outsider.project)).status_code == 200


def test_without_membership_nothing_is_shown(owner):
    nobody = operator_client("nobody")
    page = nobody.get("/dashboard/")
    assert page.status_code == 200
    assert "not a member of any project" in page.content.decode()
    assert owner.project.name not in page.content.decode()
    for tail in ["", "users/", "keys/", "settings/"]:
        assert nobody.get(project_url(owner.project, tail)).status_code == 404


@pytest.mark.parametrize("tail", ["", "users/", "keys/", "settings/"])
def test_another_projects_pages_are_404(owner, outsider, editor, tail):
    assert editor.get(project_url(owner.project, tail)).status_code == 200
    assert editor.get(project_url(outsider.project, tail)).status_code == 404
    assert editor.get(f"/dashboard/p/999999/{tail}").status_code == 404


def test_a_viewer_gets_403_on_every_change(owner, viewer):
    key = ApiKey.objects.filter(project=owner.project).first()
    posts = [
        ("keys/new/", {"name": "x"}),
        (f"keys/{key.pk}/revoke/", {}),
        ("settings/search/", {"rrf_k": "40"}),
    ]
    for tail, data in posts:
        assert viewer.post(project_url(owner.project, tail), data).status_code == 403, tail
    assert viewer.get(project_url(owner.project, f"keys/{key.pk}/revoke/")).status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None
    assert ApiKey.objects.filter(project=owner.project).count() == 2
    assert not SettingsRevision.objects.filter(project=owner.project).exists()


def test_a_viewer_sees_no_edit_controls(owner, viewer):
    keys = viewer.get(project_url(owner.project, "keys/")).content.decode()
    assert "Create key" not in keys and "Revoke" not in keys
    settings_page = viewer.get(project_url(owner.project, "settings/")).content.decode()
    assert "<fieldset disabled" in settings_page and "Save search" not in settings_page
    assert "read only" in viewer.get(project_url(owner.project)).content.decode()


# --- overview -------------------------------------------------------------------------


def test_overview_counts_by_kind_and_status(owner, editor, settings):
    remember(owner, "one", "two", "three")
    Memory.objects.filter(content="three").update(status=Memory.Status.ARCHIVED)
    page = editor.get(project_url(owner.project))
    overview = page.context["overview"]
    assert overview.total == 3
    assert overview.by_kind["message"] == {
        **dict.fromkeys(overview.statuses, 0),
        "active": 2,
        "archived": 1,
    }
    assert overview.pending == 3  # nothing embedded them
    assert list(overview.queues) == [queue.name for queue in settings.CELERY_TASK_QUEUES]
    assert all(isinstance(depth, int) for depth in overview.queues.values())
    assert "first memory" not in page.content.decode()


FACTS = "synopsis.tasks.facts_extract_task"


@pytest.fixture
def stuck_worker(monkeypatch):
    """A heartbeat namespace of this test's own, with one worker whose task is stuck."""
    monkeypatch.setattr(workers, "HEARTBEAT_PREFIX", f"memoryhub:test-worker-{uuid.uuid4().hex}:")
    started = time.time() - 150
    stuck = {"task": FACTS, "id": "t1", "input": "[42]", "started_at": started, "soft_limit": 120}
    worker_heartbeat(hostname="derived@box", info={"queues": ["derived"], "running": [stuck]})


def test_the_overview_shows_what_each_worker_runs_and_each_queue_holds(owner, editor, stuck_worker):
    page = editor.get(project_url(owner.project))
    html = page.content.decode()
    card = html[html.index('<section class="card worker-health"') :]
    card = card[: card.index("</section>")]
    assert 'data-status="red"' in card
    assert f"derived@box runs {FACTS} for 2 min 30 s, past its 2 min soft limit" in card
    assert f"runs <code>{FACTS}</code> for <strong>2 min 30 s</strong>" in card
    assert "(soft limit 2 min)" in card
    assert "queue default: no live worker takes it" in card  # nobody embeds
    assert "takes derived" in card
    assert "[42]" not in card  # a task's input (a tenant's ids): superusers alone
    root = operator_client("root", superuser=True)
    assert "on [42]" in root.get(project_url(owner.project)).content.decode()


def test_the_workers_card_is_polled_and_served_alone(owner, editor, stuck_worker):
    url = project_url(owner.project)
    html = editor.get(url).content.decode()
    assert f'hx-get="{url}?part=health" hx-trigger="every 5s"' in html
    part = editor.get(f"{url}?part=health", HTTP_HX_REQUEST="true").content.decode()
    assert part.lstrip().startswith('<section class="card worker-health"')
    assert f"runs <code>{FACTS}</code>" in part and "Added per day" not in part


def test_the_overview_shows_the_projects_parked_tasks_and_links_to_their_retry(
    owner, outsider, editor
):
    def park(project, task, key, reason=ParkedTask.Reason.TIME_LIMIT):
        ParkedTask.objects.create(
            task=task,
            input_kind="message",
            input_ids=[key],
            input_key=key,
            args=[[key]],
            attempts=3,
            reason=reason,
            project=project,
        )

    url = project_url(owner.project)
    assert "None: no task failed on the same input too often." in editor.get(url).content.decode()
    park(owner.project, FACTS, "m1")
    park(owner.project, FACTS, "m2", ParkedTask.Reason.WORKER_LOST)
    park(owner.project, "synopsis.tasks.room_summarize_task", "r1")
    park(outsider.project, FACTS, "theirs")  # another tenant's: not counted here
    ParkedTask.objects.filter(input_key="m2").update(status=ParkedTask.Status.RETRIED)
    html = editor.get(url).content.decode()
    card = html[html.index('id="parked-tasks"') :]
    card = card[: card.index("</section>")]
    assert '<p class="figure warn">2</p>' in card
    assert f"<dt><code>{FACTS}</code></dt><dd>1</dd>" in card
    assert "<dt><code>synopsis.tasks.room_summarize_task</code></dt><dd>1</dd>" in card
    assert "/admin/memories/parkedtask/?status__exact=parked" in card
    assert "theirs" not in html


def test_the_overview_says_when_redis_is_down(owner, editor, settings, tmp_path):
    settings.REDIS_URL = f"unix://{tmp_path}/no-redis-here.sock"
    page = editor.get(project_url(owner.project))
    assert page.status_code == 200
    assert "Redis unreachable" in page.content.decode()
    assert page.context["overview"].health is None


def test_the_chart_has_30_bars_with_the_days_counts(owner, editor):
    now = timezone.now()
    remember(owner, "today")
    remember(owner, "a", "b", created_at=now - timedelta(days=3))
    remember(owner, "too old", created_at=now - timedelta(days=40))
    html = editor.get(project_url(owner.project)).content.decode()
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert svg.count('class="value"') == 30
    assert 'role="img"' in svg and '<title id="chart-title">' in svg
    day = (now - timedelta(days=3)).strftime("%Y-%m-%d")
    assert re.search(rf"{day}: 2 memories</title>", svg)
    assert "3 memories from" in svg  # the one 40 days old is not in the chart


def test_a_new_project_shows_how_to_send_its_first_memory(owner, editor):
    html = editor.get(project_url(owner.project)).content.decode()
    key = ApiKey.objects.filter(project=owner.project).order_by("-created_at").first()
    assert "Send this project its first memory" in html
    assert f"mh_{key.prefix}_" in html
    assert "http://testserver/api/v1/memories/" in html
    assert "curl" in html


def test_memory_text_and_names_are_escaped(owner, editor):
    Project.objects.filter(pk=owner.project.pk).update(name="<script>alert(1)</script>")
    html = editor.get(project_url(owner.project)).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# --- API keys -------------------------------------------------------------------------


def test_a_new_key_is_shown_once_and_works(owner, editor):
    response = editor.post(project_url(owner.project, "keys/new/"), {"name": "support bot"})
    assert response.status_code == 201
    raw = re.search(r'id="new-key">(mh_[^<]+)<', response.content.decode()).group(1)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/v1/memories/?user=alice").status_code == 200
    again = editor.get(project_url(owner.project, "keys/")).content.decode()
    assert raw not in again and "support bot" in again


def test_a_revoked_key_is_rejected_by_the_api(owner, editor):
    key = owner.key
    confirm = editor.get(project_url(owner.project, f"keys/{key.pk}/revoke/"))
    assert confirm.status_code == 200 and "cannot be undone" in confirm.content.decode()
    assert owner.client.get("/api/v1/memories/?user=alice").status_code == 200
    assert editor.post(project_url(owner.project, f"keys/{key.pk}/revoke/")).status_code == 200
    assert owner.client.get("/api/v1/memories/?user=alice").status_code == 401


def test_another_projects_key_cannot_be_revoked(owner, outsider, editor):
    response = editor.post(project_url(owner.project, f"keys/{outsider.key.pk}/revoke/"))
    assert response.status_code == 404
    outsider.key.refresh_from_db()
    assert outsider.key.revoked_at is None


def test_htmx_gets_the_keys_fragment(owner, editor):
    response = editor.post(
        project_url(owner.project, "keys/new/"), {"name": "x"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="keys">') and "<html" not in html


def test_htmx_requests_carry_the_pages_csrf_token(owner):
    """The token rides on every HTMX request through hx-headers on <body>; without it a
    change is refused."""
    client = operator_client("erin", project=owner.project, enforce_csrf_checks=True)
    page = client.get(project_url(owner.project, "keys/")).content.decode()
    token = re.search(r"""<body hx-headers='\{"X-CSRFToken": "([^"]+)"\}'""", page)
    url = project_url(owner.project, "keys/new/")
    refused = client.post(url, {"name": "x"}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 403 and "CSRF" in refused.content.decode()
    accepted = client.post(
        url, {"name": "x"}, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token.group(1)
    )
    assert accepted.status_code == 201


# --- configuration --------------------------------------------------------------------


def test_a_valid_change_is_saved_through_the_service_and_recorded(owner, editor):
    response = editor.post(
        project_url(owner.project, "settings/search/"),
        {
            "default_mode": "hybrid",
            "keyword_weight": "0.7",
            "neighbour_weight": "0.3",
            "neighbour_max_bytes": "1000",
            "rrf_k": "60",
            "time_weight": "0.5",
            "recency_weight": "0",
            "recency_half_life_days": "30",
            "importance_weight": "0",
            "window_aggregate": "mean",
            "bm25_k1": "0.9",
            "bm25_b": "0.75",
        },
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert "Saved." in response.content.decode()
    owner.project.refresh_from_db()
    # only what changed became an override
    assert owner.project.settings == {"search": {"default_mode": "hybrid", "keyword_weight": 0.7}}
    revision = SettingsRevision.objects.get(project=owner.project)
    assert (revision.actor_type, revision.actor) == ("operator", "erin")
    assert owner.client.get("/api/v1/settings/").json()["values"]["search"]["keyword_weight"] == 0.7


def test_errors_are_shown_in_place_and_nothing_is_written(owner, editor):
    response = editor.post(
        project_url(owner.project, "settings/search/"),
        {"default_mode": "sideways", "rrf_k": "0", "keyword_weight": "0.5"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="card settings" id="settings-search">')
    assert "Select a valid choice" in html and "greater than or equal to 1" in html
    owner.project.refresh_from_db()
    assert owner.project.settings == {}
    assert not SettingsRevision.objects.exists()


def test_a_cross_field_rule_of_the_service_is_shown_at_its_field(owner, editor):
    fields = {
        "max_tokens": "4000",
        "history_share": "0.8",
        "retrieved_share": "0.5",
        "similarity_weight": "0.6",
        "confidence_weight": "0.4",
        "encoding": "cl100k_base",
    }
    response = editor.post(project_url(owner.project, "settings/context/"), fields)
    assert response.status_code == 422
    form = next(f for f in response.context["forms"] if f.section == "context")
    assert form.errors["retrieved_share"] == ["history_share + retrieved_share must be at most 1."]
    assert not SettingsRevision.objects.exists()


def test_an_unknown_section_is_404(owner, editor):
    assert editor.post(project_url(owner.project, "settings/nope/"), {}).status_code == 404


def test_superuser_without_membership_can_edit(owner):
    root = operator_client("root", superuser=True)
    response = root.post(project_url(owner.project, "keys/new/"), {"name": "by root"})
    assert response.status_code == 201
