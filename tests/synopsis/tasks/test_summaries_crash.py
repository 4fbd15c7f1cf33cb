"""A worker killed in the middle of a summarization leaves no trace; the next sweep
does the batch again (real worker processes, a real LLM endpoint stand-in)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from celery import current_app
from django.conf import settings
from django.db import connection
from django.utils import timezone

from memories.models import Memory, MemoryRevision, Room, content_hash
from synopsis.services.summaries import ROOM_SUMMARIZE_TASK
from synopsis.tasks import room_summarize_sweep_task
from tests.conftest import BASE_DIR, _database_url, wait_until

QUEUE = "crash-test"  # only the worker under test listens here


def room_over_capacity(owner):
    """A room of 6 messages with capacity 4, written without signals (nothing queued)."""
    room = Room.objects.create(
        project=owner.project,
        external_id="r1",
        settings={"buffer": {"max_size": 2, "buffer_multiplier": 2, "summary_batch_size": 2}},
    )
    start = timezone.now() - timedelta(hours=1)
    Memory.objects.bulk_create(
        Memory(
            project=owner.project,
            room=room,
            role="user",
            content=f"message {i}",
            content_hash=content_hash(f"message {i}"),
            created_at=start + timedelta(minutes=i),
        )
        for i in range(6)
    )
    return room


def start_worker(llm_base_url: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "LLM_BASE_URL": llm_base_url,
        "LLM_TIMEOUT": "120",
        "LLM_MAX_RETRIES": "0",
    }
    log = open(Path(settings.DATA_DIR) / "test-crash-worker.log", "wb")  # noqa: SIM115
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "memoryhub",
            "worker",
            "-Q",
            QUEUE,
            "--concurrency",
            "1",
            "--hostname",
            f"crash-{uuid.uuid4().hex[:8]}@%h",
            "--without-mingle",
            "--without-gossip",
        ],
        env=env,
        cwd=BASE_DIR,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def advisory_locks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
        return cursor.fetchone()[0]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_summary_leaves_nothing_and_the_sweep_finishes(
    owner, llm_server, celery_worker_process
):
    room = room_over_capacity(owner)
    llm_server.delay(120)  # the LLM takes its time: the worker is killed meanwhile
    worker = start_worker(llm_server.base_url)
    try:
        current_app.send_task(ROOM_SUMMARIZE_TASK, args=[room.pk], queue=QUEUE)
        wait_until(lambda: llm_server.requests, timeout=90)  # mid-summary
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
    assert not Memory.objects.filter(room=room, kind="summary").exists()
    assert Memory.objects.filter(room=room, status="active").count() == 6
    assert not MemoryRevision.objects.filter(action="archive").exists()
    wait_until(lambda: advisory_locks() == 0, timeout=10)  # died with its connection

    llm_server.reset()  # answers at once from now on
    assert room_summarize_sweep_task() == 1
    summary = wait_until(
        lambda: Memory.objects.filter(room=room, kind="summary").first(), timeout=60
    )
    assert sorted(summary.source_ids) == sorted(
        str(pk)
        for pk in Memory.objects.filter(room=room, status="archived").values_list("pk", flat=True)
    )
    assert Memory.objects.filter(room=room, kind="message", status="active").count() == 4
    # the worker embeds the summary next: let it finish before the tables are emptied
    wait_until(lambda: not Memory.objects.filter(embedding_status="pending").exists(), timeout=60)
