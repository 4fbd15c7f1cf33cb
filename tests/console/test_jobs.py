"""The console's Jobs page: what each worker runs and for how long (a stuck task red),
the queues, the project's own backlog (polled every 5 s, and says when Redis does not
answer), its parked tasks by pages with a Retry for editors (viewers: none, a forged
POST a 403; another project's task a 404), its throughput per hour, its maintenance
runs, and a line when the LLM budget is spent."""

from __future__ import annotations

import json
import re
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from console.services.jobs import PARKED_PAGE
from memories.models import EndUser, MaintenanceRun, Memory, ParkedTask, content_hash
from memories.providers.task_sending import TaskNotSent
from memories.services import workers
from memories.services.workers import worker_heartbeat
from synopsis.models import FactExtraction, LlmCall
from tests.console.operators import operator_client

HTMX = {"HTTP_HX_REQUEST": "true"}
FACTS = "synopsis.tasks.facts_extract_task"


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project)


@pytest.fixture
def viewer(owner):
    return operator_client("vic", project=owner.project, role="viewer")


@pytest.fixture
def stuck_worker(monkeypatch):
    """A heartbeat namespace of this test's own, with one worker whose task is stuck."""
    monkeypatch.setattr(workers, "HEARTBEAT_PREFIX", f"memoryhub:test-worker-{uuid.uuid4().hex}:")
    started = time.time() - 150
    stuck = {"task": FACTS, "id": "t1", "input": "[42]", "started_at": started, "soft_limit": 120}
    worker_heartbeat(hostname="derived@box", info={"queues": ["derived"], "running": [stuck]})


def url(tenant, **query):
    base = reverse("console-jobs", args=[tenant.project.pk])
    return base + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def park(project, key, *, task=FACTS, failed_at=None, error="boom"):
    return ParkedTask.objects.create(
        task=task,
        input_kind="message",
        input_ids=[key],
        input_key=key,
        args=[[key]],
        attempts=3,
        reason=ParkedTask.Reason.FAILED,
        last_error=error,
        last_failed_at=failed_at or datetime.now(UTC),
        project=project,
    )


def retry_url(tenant, parked):
    return reverse("console-jobs-retry", args=[tenant.project.pk, parked.pk])


def queued_tasks(redis_client):
    names = [queue.name for queue in django_settings.CELERY_TASK_QUEUES]
    return [
        json.loads(raw)["headers"] for name in names for raw in redis_client.lrange(name, 0, -1)
    ]


def test_the_page_shows_the_stuck_task_and_is_polled(owner, viewer, stuck_worker):
    html = viewer.get(url(owner)).content.decode()
    assert 'aria-current="page">Jobs' in html
    assert f'hx-get="{url(owner, part="live")}" hx-trigger="every 5s"' in html
    stuck = rf"derived@box runs {FACTS} for 2 min \d+ s, past its 2 min soft limit"
    assert re.search(stuck, html)  # the first request may take a few seconds
    assert "[42]" not in html  # a task's input: superusers alone
    part = viewer.get(url(owner, part="live"), **HTMX).content.decode()
    assert part.lstrip().startswith('<div id="jobs-live"')
    assert f"runs <code>{FACTS}</code> for <strong>2 min" in part
    assert "This project's backlog" in part and 'id="parked-tasks"' not in part


def test_redis_down_is_said_and_the_page_still_answers(owner, viewer, settings, tmp_path):
    settings.REDIS_URL = f"unix://{tmp_path}/no-redis-here.sock"
    page = viewer.get(url(owner, part="live"), **HTMX)
    assert page.status_code == 200
    assert "Redis unreachable" in page.content.decode()
    assert "Memories to embed" in page.content.decode()  # the database's part is there


def test_the_backlog_counts_the_projects_own_rows(owner, outsider, viewer):
    user = EndUser.objects.create(project=owner.project, external_id="maria")
    for n in range(3):
        Memory.objects.create(
            project=owner.project,
            end_user=user,
            kind="message",
            content=f"m{n}",
            content_hash=content_hash(f"m{n}"),
        )
    Memory.objects.filter(project=owner.project, content="m0").update(embedding_status="failed")
    other = EndUser.objects.create(project=outsider.project, external_id="x")
    Memory.objects.create(project=outsider.project, end_user=other, kind="message", content="o")
    backlog = viewer.get(url(owner)).context["backlog"]
    assert backlog.embedding_pending == 2  # the failed one is not waiting
    assert backlog.embedding_oldest is not None


def test_parked_tasks_of_the_project_and_an_editors_retry(
    owner, outsider, editor, redis_client, queues_empty
):
    mine = park(owner.project, "m1", error="ValueError: " + "x" * 400)
    park(outsider.project, "theirs")
    html = editor.get(url(owner)).content.decode()
    assert f'id="parked-{mine.pk}"' in html and "theirs" not in html
    assert "<details><summary>ValueError: xxx" in html  # long errors fold to a line
    row = editor.post(retry_url(owner, mine), **HTMX).content.decode()
    assert row.lstrip().startswith(f'<tr id="parked-{mine.pk}" class="status-retried"')
    assert "Sent again." in row and "retried by erin" in row
    mine.refresh_from_db()
    assert (mine.status, mine.retried_by) == ("retried", "erin")
    sent = [headers for headers in queued_tasks(redis_client) if headers["task"] == FACTS]
    assert len(sent) == 1 and sent[0]["argsrepr"] == "[['m1']]"


def test_a_retry_the_broker_refuses_leaves_it_parked(owner, editor, monkeypatch):
    parked = park(owner.project, "m1")

    def refused(*args, **kwargs):
        raise TaskNotSent("the broker did not answer")

    monkeypatch.setattr("memories.services.parking.task_send", refused)
    row = editor.post(retry_url(owner, parked), **HTMX).content.decode()
    assert "Not sent" in row and ">Retry</button>" in row
    parked.refresh_from_db()
    assert parked.status == "parked"


def test_viewers_cannot_retry_and_other_projects_tasks_are_404(owner, outsider, viewer, editor):
    parked = park(owner.project, "m1")
    theirs = park(outsider.project, "t1")
    html = viewer.get(url(owner)).content.decode()
    assert ">Retry</button>" not in html
    assert viewer.post(retry_url(owner, parked)).status_code == 403
    assert editor.post(retry_url(owner, theirs)).status_code == 404
    assert editor.get(retry_url(owner, parked)).status_code == 405
    theirs.refresh_from_db()
    parked.refresh_from_db()
    assert (theirs.status, parked.status) == ("parked", "parked")


def test_parked_tasks_page_by_keyset(owner, viewer):
    now = datetime.now(UTC)
    for n in range(PARKED_PAGE + 5):
        park(owner.project, f"m{n:02d}", failed_at=now - timedelta(minutes=n))
    first = viewer.get(url(owner, part="parked"), **HTMX)
    rows = first.context["parked"].rows
    assert [row.input_key for row in rows] == [f"m{n:02d}" for n in range(PARKED_PAGE)]
    cursor = first.context["parked"].next_cursor
    assert "Older parked tasks" in first.content.decode()
    second = viewer.get(url(owner, part="parked", after=cursor), **HTMX).context["parked"]
    assert [row.input_key for row in second.rows] == [f"m{n:02d}" for n in range(PARKED_PAGE, 30)]
    assert second.next_cursor is None
    bad = viewer.get(url(owner, part="parked", after="nope"), **HTMX).content.decode()
    assert "after: not a cursor of this list" in bad
    ParkedTask.objects.filter(input_key="m00").update(status="retried")
    retried = viewer.get(url(owner, part="parked", status="retried"), **HTMX).context["parked"]
    assert [row.input_key for row in retried.rows] == ["m00"]


def test_throughput_per_hour_and_maintenance_runs(owner, viewer):
    now = datetime.now(UTC)
    user = EndUser.objects.create(project=owner.project, external_id="maria")
    for n in range(3):
        Memory.objects.create(
            project=owner.project,
            end_user=user,
            kind="message",
            content=f"m{n}",
            content_hash=content_hash(f"m{n}"),
            embedding_status="done",
            created_at=now - timedelta(hours=2),
            embedded_at=now - timedelta(hours=2),
        )
    message = Memory.objects.filter(project=owner.project).first()
    FactExtraction.objects.create(project=owner.project, message=message, status="done", facts=2)
    MaintenanceRun.objects.create(task="prune", project=owner.project, counts={"age": 4})
    page = viewer.get(url(owner))
    embedded, mined = page.context["embedded_chart"], page.context["mined_chart"]
    assert len(embedded.bars) == 48 and embedded.total == 3
    assert embedded.bars[-3].count == 3  # two hours ago
    assert (mined.total, mined.bars[-1].count, page.context["facts_created"]) == (1, 1, 2)
    html = page.content.decode()
    assert "3 memories embedded in 48 hours · at most 3 per hour" in html
    assert "<code>prune</code>" in html and "age 4" in html


def test_a_spent_llm_budget_is_said(owner, viewer, redis_client):
    assert 'id="llm-fallback"' not in viewer.get(url(owner)).content.decode()
    for key in redis_client.scan_iter(match="memoryhub:llm-tokens:*"):
        redis_client.delete(key)  # the month's sum the page cached (a call made here adds)
    owner.client.patch("/api/v1/settings/", {"llm": {"monthly_token_budget": 10}}, format="json")
    LlmCall.objects.create(
        project=owner.project, purpose="summary", model="m", status="ok", prompt_tokens=10
    )
    html = viewer.get(url(owner)).content.decode()
    assert 'id="llm-fallback"' in html and "offline methods" in html


def test_another_projects_page_is_a_404(owner, outsider):
    stranger = operator_client("sam", project=outsider.project)
    assert stranger.get(url(owner)).status_code == 404
