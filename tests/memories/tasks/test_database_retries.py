"""The tasks an event queues retry after a database error that passes (a connection
timed out under load, a deadlock with a maintenance task) instead of leaving the work
to the next sweep: seen in a full bench run, where a write's fact extraction failed on
a connection timeout and waited ~2 minutes for the sweep, and a flush of the reads
failed on a deadlock with the importance recompute."""

import pytest
from django.db import OperationalError

from memories import tasks as memory_tasks
from synopsis import tasks as synopsis_tasks


def _failing_once(result):
    calls = []

    def service(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise OperationalError("deadlock detected")
        return result

    return service, calls


@pytest.mark.parametrize(
    ("module", "task", "service_name", "args"),
    [
        (synopsis_tasks, "facts_extract_task", "messages_facts_extract", [[]]),
        (memory_tasks, "accesses_flush_task", "accesses_flush", []),
    ],
)
def test_a_passing_database_error_retries_the_task(monkeypatch, module, task, service_name, args):
    service, calls = _failing_once(3)
    monkeypatch.setattr(module, service_name, service)
    outcome = getattr(module, task).apply(args=args)  # eager: the retry runs at once
    assert outcome.successful() and outcome.get() == 3
    assert len(calls) == 2


def test_a_database_error_that_stays_fails_the_task_after_its_retries(monkeypatch):
    calls = []

    def service(**kwargs):
        calls.append(kwargs)
        raise OperationalError("connection timeout expired")

    monkeypatch.setattr(memory_tasks, "accesses_flush", service)
    outcome = memory_tasks.accesses_flush_task.apply()
    assert outcome.failed() and isinstance(outcome.result, OperationalError)
    assert len(calls) == 1 + memory_tasks.accesses_flush_task.max_retries
