"""The Jobs page in a browser, with a real worker running a real task stuck past its
soft time limit (tests/console/browser/sleeper.py): the page turns it red without a
reload, naming the worker, the task and how long it has run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from playwright.sync_api import expect

from memories.services import workers
from tests.conftest import BASE_DIR, _database_url, wait_until
from tests.console.browser.conftest import screenshot
from tests.console.browser.sleeper import SLEEPER, sleeper

pytestmark = pytest.mark.slow


@pytest.fixture
def sleepy_worker(live_server) -> Iterator[str]:
    """A real worker on a queue of its own that can run the sleeper; its hostname."""
    queue = f"sleepy-{uuid.uuid4().hex[:8]}"
    hostname = f"{queue}@test"
    env = {**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": settings.REDIS_URL}
    log = open(f"{settings.DATA_DIR}/{queue}.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "memoryhub", "worker", "-I",
         "tests.console.browser.sleeper", "-Q", queue, "--concurrency", "1",
         "--hostname", hostname, "--without-mingle", "--without-gossip"],
        env=env, cwd=BASE_DIR, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        wait_until(lambda: client.exists(f"{workers.HEARTBEAT_PREFIX}{hostname}"), timeout=90)
        sleeper.apply_async(args=[60], queue=queue)
        yield hostname
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the worker and its pool child
        process.wait(timeout=20)
        log.close()
        # forget it: later tests must not see a worker that died, nor the sleeper's
        # message it held (the session's shared worker waits for no unacked message)
        client.delete(f"{workers.HEARTBEAT_PREFIX}{hostname}")
        client.hdel(f"{workers.HEARTBEAT_PREFIX.rstrip(':')}-last", hostname)
        unacked_forget(client, queue)


def unacked_forget(client: redis.Redis, queue: str) -> None:
    """Drop the messages of ``queue`` that a killed worker held unacknowledged (the
    Redis transport keeps them for its visibility timeout, an hour, then redelivers)."""
    for tag, payload in client.hgetall("unacked").items():
        if json.loads(payload)[-1] == queue:
            client.hdel("unacked", tag)
            client.zrem("unacked_index", tag)
    client.delete(queue)


def test_a_stuck_task_turns_red_on_the_jobs_page(editor_page, owner, sleepy_worker):
    page = editor_page
    # the live server's first request imports the URLconf (the MCP SDK alone ~3 s), on a
    # machine busy starting the worker: more than the default 10 s at times
    page.goto(f"/dashboard/p/{owner.project.pk}/jobs/", timeout=60_000)
    # no reload: the workers' card asks again every 5 s
    stuck = page.get_by_text(f"{sleepy_worker} runs {SLEEPER}").first
    expect(stuck).to_be_visible(timeout=30_000)
    expect(page.get_by_text("soft limit").first).to_be_visible()
    screenshot(page, "console-jobs-stuck")
