"""The base class of every MemoryHub task: time limits that record what they stopped, and
poison inputs parked instead of run in a loop.

A task says what its input is (a TaskInput: the kind of thing its arguments name, their
ids, the project, what to record when it is interrupted) and gets its limits from
memories/task_limits.py. Each attempt at an input is counted (services/task_attempts.py):

* it succeeds, or fails for a passing reason that the task retries itself (Retry): the
  count is forgotten;
* it reaches its soft time limit: the TaskInput's ``interrupted`` records the input (a
  message skipped, a document failed...), and the task stops cleanly, returning None;
* it raises: ``interrupted`` is told (it may record the input), the exception goes on;
* its process is killed at the hard limit: the worker's main process tells
  ``interrupted`` (Task.on_failure, TimeLimitExceeded) and the pool forks a new process;
* its process dies otherwise (the kernel's OOM killer, a stop that did not wait):
  acks_late + reject_on_worker_lost deliver the task again, and that attempt finds the
  one before never ended: it tells ``interrupted`` (reason "worker lost") before it runs.
  A death may be no fault of the input's (a restart): hooks record the input only at
  ``final``, when it is parked, or count deaths per item of their own (a message).

An input that failed (or timed out) PARKING_ATTEMPTS times, or whose attempts died that
many times, is parked (services/parking.py): a recorded ParkedTask, and every later
delivery of it is acknowledged without running until an operator retries it. A task
without an input (a periodic sweep) counts the deliveries of its message instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import redis
from celery import Task
from celery.exceptions import Retry, SoftTimeLimitExceeded, TimeLimitExceeded
from django.db import close_old_connections

from memories.models import ParkedTask
from memories.services.parking import Parking, parking_attempts, task_park
from memories.services.task_attempts import (
    Attempt,
    attempt_begin,
    attempt_error,
    attempt_failed,
    attempt_parked,
    attempt_succeeded,
    attempts_key,
    input_key,
)
from memories.task_limits import TASK_LIMITS

logger = logging.getLogger(__name__)

RUN = "run"  # the input kind of a task without arguments (a periodic sweep, a run)
Reason = ParkedTask.Reason
DIED = "its process died during the attempt before (out of memory, or killed)"


@dataclass(frozen=True)
class Interruption:
    """An attempt that stopped before its input was done, for its TaskInput's hook."""

    task_id: str
    args: Sequence[Any]
    kwargs: Mapping[str, Any]
    reason: str  # a ParkedTask.Reason
    error: str
    exception: BaseException | None = None
    final: bool = False  # the input is parked now: it will not be tried again


def first_argument_ids(args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    """The ids a task's first argument names (one id, or a list of them)."""
    first = args[0] if args else next(iter(kwargs.values()), None)
    if first is None:
        return []
    return list(first) if isinstance(first, list | tuple) else [first]


def no_ids(args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    return []


@dataclass(frozen=True)
class TaskInput:
    """What a task works on: the kind and ids its arguments name, the project they
    belong to, what to record when an attempt is interrupted, and the keyword arguments
    an operator's retry adds (e.g. to take a failed document up again)."""

    kind: str = RUN
    ids: Callable[[Sequence[Any], Mapping[str, Any]], list[Any]] = first_argument_ids
    project: Callable[[Sequence[Any]], int | None] | None = None
    interrupted: Callable[[Interruption], None] | None = None
    retry_kwargs: Mapping[str, Any] = field(default_factory=dict)


class LimitedTask(Task):  # type: ignore[misc]
    """See the module docstring. A task sets ``task_input`` (default: a run, no input)."""

    task_input: TaskInput = TaskInput(ids=no_ids)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = self.request
        if request.called_directly or request.is_eager:  # a test, a command: no redelivery
            return super().__call__(*args, **kwargs)
        key = self._key(request.id, args, kwargs)
        attempt = self._begin(key, request.id, args, kwargs)
        if attempt is None:
            return None
        try:
            result = self.run(*args, **kwargs)  # self.run: the tracer's request stays current
        except Retry:
            self._attempts(attempt_succeeded, key=key)  # a passing error: its own retries
            raise
        except SoftTimeLimitExceeded as exc:
            error = f"soft time limit ({self.soft_time_limit:g} s)"
            self._stopped(
                key, Interruption(request.id, args, kwargs, Reason.TIME_LIMIT, error, exc)
            )
            return None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self._stopped(key, Interruption(request.id, args, kwargs, Reason.FAILED, error, exc))
            raise
        self._attempts(attempt_succeeded, key=key)
        return result

    def on_failure(self, exc: Any, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        """In the worker's main process, at the hard limit (its pool process killed):
        record the input as the soft limit would have."""
        if not isinstance(exc, TimeLimitExceeded):
            return  # raised in the task: __call__ has recorded it
        error = f"hard time limit ({self.time_limit:g} s): its process was killed"
        interruption = Interruption(
            task_id, args or (), kwargs or {}, Reason.TIME_LIMIT, error, exc
        )
        # the connection this process opened before forking its pool is dead (each pool
        # process closed its copy, which ends the session): a health check finds it so
        close_old_connections()
        try:
            self._stopped(self._key(task_id, args or (), kwargs or {}), interruption)
        except Exception:  # noqa: BLE001 - never break the worker's main loop
            logger.exception("%s[%s]: the hard time limit was not recorded", self.name, task_id)

    def _key(self, task_id: str | None, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        spec = self.task_input
        if spec.kind == RUN:
            return attempts_key(self.name, f"id:{task_id}")
        return attempts_key(self.name, input_key(spec.kind, spec.ids(args, kwargs)))

    def _begin(
        self, key: str, task_id: str, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> Attempt | None:
        """Count the attempt; None when the input is (or now gets) parked: do not run.
        Without Redis the task runs uncounted (its broker is Redis: rare)."""
        attempt = self._attempts(attempt_begin, key=key)
        if not isinstance(attempt, Attempt):
            return Attempt(key=key, number=1, died=False, parked=False)
        if attempt.parked:
            logger.warning("%s[%s]: its input is parked; not run", self.name, task_id)
            return None
        final = attempt.number > parking_attempts()
        if not (attempt.died or final):
            return attempt
        reason = Reason.WORKER_LOST if attempt.died else Reason.FAILED
        error = DIED if attempt.died else str(self._attempts(attempt_error, key=key) or "")
        interruption = Interruption(task_id, args, kwargs, reason, error, final=final)
        if attempt.died:
            self._interrupted(interruption)
        if final:
            self._park(key, interruption, attempt.number - 1)
            return None
        return attempt

    def _stopped(self, key: str, interruption: Interruption) -> None:
        """The attempt ended without its input done: count it, let the TaskInput record
        the input, park it at PARKING_ATTEMPTS."""
        logger.warning("%s[%s] stopped: %s", self.name, interruption.task_id, interruption.error)
        failures = self._attempts(attempt_failed, key=key, error=interruption.error)
        final = isinstance(failures, int) and failures >= parking_attempts()
        self._interrupted(replace(interruption, final=final))
        if final:
            self._park(key, interruption, failures)

    def _interrupted(self, interruption: Interruption) -> None:
        hook = self.task_input.interrupted
        if hook is None:
            return
        try:
            hook(interruption)
        except Exception:  # noqa: BLE001 - the original failure must still be handled
            logger.exception("%s[%s]: its input was not recorded", self.name, interruption.task_id)

    def _park(self, key: str, interruption: Interruption, attempts: int) -> None:
        spec = self.task_input
        ids = spec.ids(interruption.args, interruption.kwargs)
        parking = Parking(
            task=self.name,
            input_kind=spec.kind,
            input_ids=ids,
            input_key=RUN if spec.kind == RUN else input_key(spec.kind, ids),
            reason=interruption.reason,
            error=interruption.error,
            attempts=attempts,
            args=list(interruption.args),
            kwargs={**interruption.kwargs, **spec.retry_kwargs},
            project_id=spec.project(ids) if spec.project is not None else None,
        )
        try:
            task_park(parking=parking)
        except Exception:  # noqa: BLE001 - the database is away: the next attempt parks it
            logger.exception("%s[%s]: not parked", self.name, interruption.task_id)
            return
        self._attempts(attempt_parked, key=key)

    def _attempts(self, function: Callable[..., Any], **kwargs: Any) -> Any:
        """A task_attempts call; None when Redis fails (logged)."""
        try:
            return function(**kwargs)
        except redis.RedisError as error:
            logger.warning("%s: attempts not counted (%s)", self.name, error)
            return None


def task_options(name: str, task_input: TaskInput | None = None, **options: Any) -> dict[str, Any]:
    """The decorator's options of the task ``name``: its name, LimitedTask, its input
    (default: a run without one), its limits from TASK_LIMITS (KeyError for a task
    missing from the table: every task has limits), and ``options``."""
    limit = TASK_LIMITS[name]
    return {
        "name": name,
        "base": LimitedTask,
        "task_input": task_input or TaskInput(ids=no_ids),
        "soft_time_limit": limit.soft,
        "time_limit": limit.hard,
        **options,
    }
