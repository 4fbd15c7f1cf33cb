"""Importance (MUXI): the score's formula, per-user normalization of access frequency,
the project's weights, only changed rows written (no updated_at, no revision), the
chunks, the beat task (one maintenance run per project) and the command."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from memories.models import EndUser, MaintenanceRun, Memory, MemoryRevision, content_hash
from memories.services import importance as importance_service
from memories.services.importance import importance_recompute, importance_recompute_total
from memories.tasks import importance_recompute_task


def remember(project, text, *, user=None, days=0.0, accessed_days=None, **fields):
    """A memory ``days`` old (last read ``accessed_days`` ago), written directly."""
    now = timezone.now()
    end_user = None
    if user is not None:
        end_user, _ = EndUser.objects.get_or_create(project=project, external_id=user)
    return Memory.objects.create(
        project=project,
        end_user=end_user,
        content=text,
        content_hash=content_hash(text),
        created_at=now - timedelta(days=days),
        accessed_at=None if accessed_days is None else now - timedelta(days=accessed_days),
        **fields,
    )


def score(memory):
    return Memory.objects.get(pk=memory.pk).importance_score


@pytest.fixture
def alice(owner):
    """Three memories of one user whose scores are worked out by hand (30-day half-life,
    weights 0.3 recency, 0.3 access, 0.4 explicit)."""
    return {
        # recency 0.5 (one half-life), never read, importance 0.5: 0.15 + 0 + 0.2
        "old": remember(owner.project, "old", user="alice", days=30),
        # read 15 days ago (recency 0.5 ** 0.5), 3 of the user's max 7 reads
        # (ln 4 / ln 8 = 2/3), importance 0.2: 0.3 x 0.7071 + 0.3 x 2/3 + 0.08
        "read": remember(
            owner.project,
            "read",
            user="alice",
            days=60,
            accessed_days=15,
            access_count=3,
            importance=0.2,
        ),  # fmt: skip
        # new, the most read (access 1), pinned (explicit 1 whatever its importance)
        "pinned": remember(
            owner.project, "pinned", user="alice", access_count=7, importance=0.1, pinned=True
        ),
    }


EXPECTED = {
    "old": 0.35,
    "read": round(0.3 * math.sqrt(0.5) + 0.3 * (2 / 3) + 0.4 * 0.2, 3),  # 0.492
    "pinned": 1.0,
}


def test_the_score_on_hand_computed_values(alice, owner):
    assert importance_recompute(project=owner.project) == 3
    for name, memory in alice.items():
        assert score(memory) == pytest.approx(EXPECTED[name], abs=1e-3), name


def test_access_frequency_is_normalized_within_the_user(alice, owner):
    # another user's far more read memory and the user-less ones change nothing for alice
    bob = remember(owner.project, "bob's", user="bob", access_count=1000)
    shared = remember(owner.project, "shared", access_count=10, importance=0.0)
    shared_more = remember(owner.project, "shared more", access_count=100, importance=0.0)
    importance_recompute(project=owner.project)
    for name, memory in alice.items():
        assert score(memory) == pytest.approx(EXPECTED[name], abs=1e-3), name
    assert score(bob) == pytest.approx(0.3 + 0.3 + 0.2, abs=1e-3)  # bob's most read: 1
    # user-less memories are compared with each other: ln 11 / ln 101 and 1
    assert score(shared) == pytest.approx(0.3 + 0.3 * math.log(11) / math.log(101), abs=1e-3)
    assert score(shared_more) == pytest.approx(0.6, abs=1e-3)


def test_the_weights_and_half_life_are_the_projects(alice, owner):
    owner.project.settings = {
        "importance": {
            "recency_weight": 0.5, "access_weight": 0.0, "explicit_weight": 0.5,
            "half_life_days": 60,
        }
    }  # fmt: skip
    owner.project.save()
    importance_recompute(project=owner.project)
    assert score(alice["old"]) == pytest.approx(0.5 * math.sqrt(0.5) + 0.25, abs=1e-3)
    assert score(alice["read"]) == pytest.approx(0.5 * 0.5**0.25 + 0.1, abs=1e-3)
    assert score(alice["pinned"]) == pytest.approx(1.0, abs=1e-3)


def test_only_changed_scores_are_written_without_updated_at_or_revision(alice, owner):
    importance_recompute(project=owner.project)
    before = {m.pk: m.updated_at for m in Memory.objects.all()}
    xmin = _xmin(alice["old"])
    assert importance_recompute(project=owner.project) == 0  # nothing moved
    assert _xmin(alice["old"]) == xmin  # the row was not rewritten
    Memory.objects.filter(pk=alice["old"].pk).update(importance=1.0)
    assert importance_recompute(project=owner.project) == 1
    assert score(alice["old"]) == pytest.approx(0.55, abs=1e-3)
    assert {m.pk: m.updated_at for m in Memory.objects.all()} == before
    assert not MemoryRevision.objects.exists()


def _xmin(memory):
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM memories_memory WHERE id = %s", [memory.pk])
        return cursor.fetchone()[0]


def test_a_future_created_at_counts_as_new(owner):
    memory = remember(owner.project, "from the future", days=-3)
    importance_recompute(project=owner.project)
    assert score(memory) == pytest.approx(0.3 + 0.2, abs=1e-3)


def test_a_very_old_memory_scores_without_underflow(owner):
    memory = remember(owner.project, "ancient", days=36500, importance=0.0)
    owner.project.settings = {"importance": {"half_life_days": 0.01}}
    owner.project.save()
    importance_recompute(project=owner.project)
    assert score(memory) == 0.0


def test_chunks_cover_every_memory_once(owner, monkeypatch):
    monkeypatch.setattr(importance_service, "CHUNK_ROWS", 2)
    memories = [remember(owner.project, f"big {i}", user="big", days=i) for i in range(7)]
    memories += [remember(owner.project, f"none {i}", days=i) for i in range(5)]
    memories += [remember(owner.project, f"small {i}", user=f"u{i}") for i in range(3)]
    Memory.objects.filter(pk__in=[m.pk for m in memories]).update(importance_score=0.0)
    covered = []
    assert importance_recompute(project=owner.project, progress=covered.append) == 15
    assert sum(covered) == 15 == importance_recompute_total(project=owner.project)
    assert len(covered) > 5  # the large groups were cut into created_at ranges
    for memory in memories:
        age = (timezone.now() - memory.created_at).total_seconds() / 86400
        assert score(memory) == pytest.approx(0.3 * 0.5 ** (age / 30) + 0.2, abs=1e-3)


def test_one_project_leaves_the_others_alone(owner, outsider):
    mine = remember(owner.project, "mine", importance=1.0)
    theirs = remember(outsider.project, "theirs", importance=1.0)
    importance_recompute(project=owner.project)
    assert (score(mine), score(theirs)) == (pytest.approx(0.7, abs=1e-3), 0.5)
    importance_recompute()
    assert score(theirs) == pytest.approx(0.7, abs=1e-3)


def test_the_beat_task_records_one_maintenance_run_per_project(alice, owner, outsider):
    remember(outsider.project, "theirs")
    assert importance_recompute_task() == 3  # the outsider's new memory already scores 0.5
    runs = {run.project_id: run for run in MaintenanceRun.objects.filter(task="importance")}
    assert runs.keys() == {owner.project.pk, outsider.project.pk}
    assert runs[owner.project.pk].status == MaintenanceRun.Status.OK
    assert runs[owner.project.pk].counts == {"memories": 3, "changed": 3}
    assert runs[outsider.project.pk].counts == {"memories": 1, "changed": 0}


def test_the_command_recomputes_one_project(alice, owner, outsider, capsys):
    theirs = remember(outsider.project, "theirs", importance=1.0)
    call_command("recompute_importance", "--project", owner.project.name)
    assert "Recomputed 3 importance scores, 3 changed." in capsys.readouterr().out
    assert score(alice["pinned"]) == pytest.approx(1.0, abs=1e-3)
    assert score(theirs) == 0.5
    call_command("recompute_importance")
    assert score(theirs) == pytest.approx(0.7, abs=1e-3)


def test_a_chunk_that_deadlocks_is_run_again_after_growing_pauses(owner, monkeypatch):
    from django.db import OperationalError
    from psycopg.errors import DeadlockDetected

    from memories.services import importance

    calls, pauses = [], []
    original_atomic = importance.transaction.atomic

    class Aborted:  # PostgreSQL aborts the chunk's transaction ``times`` times
        def __init__(self, times):
            self.times = times

        def __call__(self, *args, **kwargs):
            calls.append(1)
            if len(calls) <= self.times:
                error = OperationalError("deadlock detected")
                error.__cause__ = DeadlockDetected("deadlock detected")
                raise error
            return original_atomic(*args, **kwargs)

    monkeypatch.setattr(importance.time, "sleep", pauses.append)
    monkeypatch.setattr(importance.transaction, "atomic", Aborted(5))
    assert importance._chunk_run("SELECT 1", {}) == 1
    assert len(calls) == 6 and pauses == [0.25, 0.5, 1.0, 2.0, 4.0]
    calls.clear()
    monkeypatch.setattr(importance.transaction, "atomic", Aborted(6))
    with pytest.raises(OperationalError):  # the last attempt's deadlock is raised
        importance._chunk_run("SELECT 1", {})
