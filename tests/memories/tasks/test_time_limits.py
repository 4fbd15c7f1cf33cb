"""Every task has its own time limits (memories/task_limits.py), and what a task stopped at
its limit is recorded: a fact extraction over its soft limit skips the message it was
mining ("time limit"), parks it for an operator and queues the rest; at its hard limit
the pool process is killed, replaced, and the next task runs (real worker processes, an
LLM stand-in that does not answer)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest
from celery import current_app

from memories.models import EndUser, Memory, ParkedTask, content_hash
from memories.task_guard import LimitedTask
from memories.task_limits import GRACE, TASK_LIMITS, TaskLimit, _overrides
from synopsis.models import FactExtraction
from synopsis.services.facts import FACTS_EXTRACT_TASK
from tests.conftest import wait_until
from tests.memories.tasks.workers import pool_pid, worker_running
from tests.synopsis.llm_server import LlmServer

QUEUE = "limits-test"  # only the worker under test takes it (and derived, for the rest)
NO_FACTS = '{"facts": []}'


@pytest.fixture(scope="module")
def llm() -> Iterator[LlmServer]:
    server = LlmServer().start()
    yield server
    server.stop()


def user_messages(project, *texts: str) -> list[Memory]:
    """User messages of one user, written without signals (nothing queued)."""
    user = EndUser.objects.create(project=project, external_id="alice")
    return Memory.objects.bulk_create(
        Memory(project=project, end_user=user, role="user", content=t, content_hash=content_hash(t))
        for t in texts
    )


def stuck_then_next(owner, llm: LlmServer) -> tuple[Memory, Memory]:
    """Two messages of a user: the LLM never answers about the first in time, and at
    once about the second."""
    stuck, next_one = user_messages(owner.project, "I live in Lyon.", "I work as a nurse.")
    llm.reset()
    llm.delay(120)
    llm.ok(NO_FACTS)
    return stuck, next_one


def test_every_task_has_its_own_limits_from_the_table() -> None:
    current_app.loader.import_default_modules()
    # the product's tasks: not Celery's own, not a test's (tests/console/browser/sleeper.py)
    ours = {
        name: task
        for name, task in current_app.tasks.items()
        if "celery." not in name and not name.startswith("tests.")
    }
    assert set(ours) == set(TASK_LIMITS)
    for name, task in ours.items():
        assert isinstance(task, LimitedTask), name
        limit = TASK_LIMITS[name]
        assert (task.soft_time_limit, task.time_limit) == (limit.soft, limit.hard), name
        assert limit.hard - limit.soft >= GRACE, name  # time to record the input


def test_task_time_limits_override_a_task_by_its_short_or_full_name() -> None:
    names = ["synopsis.tasks.facts_extract_task", "memories.tasks.prune_task"]
    given = "facts_extract_task=2/5, memories.tasks.prune_task=60/90"
    assert _overrides(given, names) == {
        names[0]: TaskLimit(soft=2, hard=5),
        names[1]: TaskLimit(soft=60, hard=90),
    }
    for wrong in ("nothing_task=1/2", "prune_task=60", "prune_task"):
        with pytest.raises(ValueError, match="TASK_TIME_LIMITS"):
            _overrides(wrong, names)


def worker_env(llm: LlmServer, limits: str) -> dict[str, str]:
    return {
        "LLM_BASE_URL": llm.base_url,
        "LLM_TIMEOUT": "120",
        "LLM_MAX_RETRIES": "0",
        "TASK_TIME_LIMITS": limits,
    }


def send(name: str, args: list) -> None:
    """Send without this process's limits: a sender that has the task registered puts
    its own limits in the message, over the worker's (TASK_TIME_LIMITS is the worker's)."""
    current_app.send_task(name, args=args, queue=QUEUE, time_limit=None, soft_time_limit=None)


@contextmanager
def both_sent(
    llm: LlmServer, limits: str, messages: list[Memory]
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A worker with these limits, its pool process, and the messages' task sent to it."""
    with worker_running(queues=[QUEUE, "derived"], env=worker_env(llm, limits)) as worker:
        pool = pool_pid(worker)
        send(FACTS_EXTRACT_TASK, [[str(message.pk) for message in messages]])
        yield worker, pool


def extraction(message: Memory) -> FactExtraction | None:
    return FactExtraction.objects.filter(message=message).first()


def pending(tenant) -> bool:
    return Memory.objects.filter(
        project=tenant.project, embedding_status=Memory.EmbeddingStatus.PENDING
    ).exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_fact_extraction_over_its_soft_limit_skips_the_message_and_the_rest_is_mined(
    owner, llm, celery_worker_process
) -> None:
    stuck, next_one = stuck_then_next(owner, llm)
    with both_sent(llm, "facts_extract_task=3/60", [stuck, next_one]) as (worker, pool):
        skipped = wait_until(lambda: extraction(stuck), timeout=90)
        assert (skipped.status, skipped.error) == ("skipped", "time limit")
        parked = wait_until(lambda: ParkedTask.objects.filter(task=FACTS_EXTRACT_TASK).first())
        assert (parked.input_kind, parked.input_ids, parked.reason) == (
            "message",
            [str(stuck.pk)],
            "time limit",
        )
        assert (parked.project, parked.args, parked.kwargs) == (
            owner.project,
            [[str(stuck.pk)]],
            {"again": True},
        )
        # the rest went to a new task, which the worker ran next
        mined = wait_until(lambda: extraction(next_one), timeout=60)
        assert mined.status == "done"
        assert pool_pid(worker) == pool  # a soft limit stops the task, not the process
        # what the mining wrote is embedded next: done before the tables are emptied (a
        # worker's transaction beside the teardown's TRUNCATE deadlocked once in CI)
        wait_until(lambda: not pending(owner), timeout=60)
    assert Memory.objects.get(pk=stuck.pk).content == "I live in Lyon."  # nothing lost


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_at_its_hard_limit_the_process_is_replaced_the_input_recorded_and_the_next_runs(
    owner, llm, celery_worker_process
) -> None:
    stuck, next_one = stuck_then_next(owner, llm)
    with both_sent(llm, "facts_extract_task=3/8", [stuck, next_one]) as (worker, pool):
        wait_until(lambda: llm.requests, timeout=60)
        # a process stuck where no signal reaches it: the soft limit cannot stop it
        os.kill(pool, signal.SIGSTOP)
        skipped = wait_until(lambda: extraction(stuck), timeout=60)  # by the main process
        assert (skipped.status, skipped.error) == ("skipped", "time limit")
        parked = wait_until(lambda: ParkedTask.objects.filter(task=FACTS_EXTRACT_TASK).first())
        assert "hard time limit (8 s)" in parked.last_error
        wait_until(lambda: pool not in [p.pid for p in psutil.Process(worker.pid).children()])
        assert pool_pid(worker, other_than=pool) != pool  # forked again
        mined = wait_until(lambda: extraction(next_one), timeout=60)  # the next task ran
        assert mined.status == "done"
        assert worker.poll() is None
