"""A late write of a worker's service (here in the test's own process) whose owner is
deleted as it commits is dropped with a log line, not raised."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from memories.models import EndUser, Memory, Synopsis, content_hash
from memories.services.revisions import Actor
from memories.services.users import end_user_delete
from synopsis.services.synopses import synopsis_generate
from tests.conftest import wait_until
from tests.races.harness import Deleter, blocked_by, raw_connection

pytestmark = pytest.mark.django_db(transaction=True)


def committed_once_blocking(deleter: Deleter) -> threading.Thread:
    """A thread that lets ``deleter`` commit once someone waits for its locks."""

    def watch() -> None:
        with raw_connection() as control:
            wait_until(lambda: blocked_by(control, deleter.started_pid()), timeout=30)
        deleter.commit()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_synopsis_made_while_its_user_is_deleted_is_dropped(owner: Any, caplog: Any) -> None:
    user = EndUser.objects.create(project=owner.project, external_id="u")
    Memory.objects.create(
        project=owner.project,
        end_user=user,
        kind="fact",
        content="Lives in Lisbon.",
        content_hash=content_hash("Lives in Lisbon."),
    )
    deleter = Deleter(lambda: end_user_delete(end_user=user, actor=Actor.system("test")), hold=True)
    deleter.start()
    assert deleter.deleted.wait(timeout=30)
    watcher = committed_once_blocking(deleter)
    with caplog.at_level(logging.INFO, logger="synopsis.services.synopses"):
        stored = synopsis_generate(end_user_id=user.pk, force=True)  # stores as it commits
    watcher.join(timeout=30)
    assert deleter.finish().counts["memories"] == 1
    assert stored == []
    assert "was deleted while their synopsis was made" in caplog.text
    assert not Synopsis.objects.exists()
    assert not EndUser.objects.filter(pk=user.pk).exists()
