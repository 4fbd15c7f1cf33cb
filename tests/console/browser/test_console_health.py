"""The overview's workers and queues in a browser: the card follows a worker whose task
gets stuck, without a reload (its HTMX poll). Screenshots under var/screenshots/
(console-overview-health*)."""

from __future__ import annotations

import time
import uuid

import pytest
from kombu import Queue

from memories.services import workers
from memories.services.workers import worker_heartbeat
from tests.console.browser.conftest import PHONE, screenshot

pytestmark = pytest.mark.slow
expect = pytest.importorskip("playwright.sync_api").expect

FACTS = "synopsis.tasks.facts_extract_task"


@pytest.fixture
def own_workers(monkeypatch, settings):
    """Heartbeats and a queue of this test's own (the live server is a thread of this
    process: it reads them too)."""
    monkeypatch.setattr(workers, "HEARTBEAT_PREFIX", f"memoryhub:test-worker-{uuid.uuid4().hex}:")
    settings.CELERY_TASK_QUEUES = (Queue(f"test-derived-{uuid.uuid4().hex[:8]}"),)


def test_the_workers_card_follows_a_stuck_task(editor_page, owner, own_workers):
    worker_heartbeat(hostname="derived@box", info={"running": []})
    editor_page.goto(f"/dashboard/p/{owner.project.pk}/")
    card = editor_page.locator("#worker-health")
    expect(card).to_contain_text("Every worker and queue is within its limits.")
    expect(card).to_contain_text("idle")
    started = time.time() - 150
    stuck = {"task": FACTS, "id": "t1", "input": "[42]", "started_at": started, "soft_limit": 120}
    worker_heartbeat(hostname="derived@box", info={"running": [stuck]})
    # no reload: the card asks again every 5 s
    reason = f"derived@box runs {FACTS} for 2 min"
    expect(card.locator(".health-reasons")).to_contain_text(reason, timeout=15_000)
    expect(card).to_contain_text("past its 2 min soft limit")
    expect(card).to_have_attribute("data-status", "red")
    screenshot(editor_page, "console-overview-health")
    editor_page.set_viewport_size(PHONE)
    screenshot(editor_page, "console-overview-health-phone")
