"""Pruning runs: the dry run equal to the real run, other users and projects untouched,
revisions, a crash mid-run, rows changed since the plan, the purge, the queued run and
the beat task (what each policy chooses: test_pruning_plan.py)."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from celery import current_app
from django.utils import timezone

from memories.models import (
    Embedding,
    EmbeddingSpace,
    EndUser,
    MaintenanceRun,
    Memory,
    MemoryRevision,
    content_hash,
)
from memories.services import pruning
from memories.services.configuration import project_settings_update
from memories.services.pruning import (
    prune_enqueue,
    prune_plan,
    prune_queued_run,
    prune_run,
    pruned_purge,
)
from memories.services.revisions import Actor
from memories.tasks import prune_task

SYSTEM = Actor.system("prune")
CONTENT_BYTES = 98  # + 2 for the metadata "{}": 100 bytes a memory

# alice's memories: name -> (kind, days old, importance_score, fields)
ALICE = {
    "m1": ("message", 400, 0.1, {}),  # old, unimportant, unread
    "m2": ("message", 401, 0.9, {}),  # old but important
    "m3": ("message", 402, 0.3, {"access_count": 7}),  # old but often read
    "m4": ("message", 403, 0.1, {"pinned": True}),  # old, pinned
    "m5": ("message", 404, 0.1, {"status": "archived"}),  # old, condensed into a summary
    "m6": ("message", 10, 0.3, {}),
    "m7": ("message", 5, 0.2, {}),
    "m8": ("message", 3, 0.6, {"metadata": {"pad": "x" * 591}}),  # 700 bytes
    "m9": ("message", 1, 0.5, {}),
    "f1": ("fact", 20, 0.4, {}),
    "f2": ("fact", 15, 0.7, {}),
    "f3": ("fact", 405, 0.0, {"status": "superseded"}),  # history: never pruned
    "f4": ("fact", 12, 0.2, {"pinned": True}),
}
POLICY = {  # every policy on
    "max_age_days": 365,
    "age_keep_importance": 0.8,
    "age_keep_access_count": 5,
    "fifo_per_user_kind": 3,
    "importance_cap": 5,
    "max_mb_per_user": 0.001,  # 1,048 bytes
}
ONE_POLICY = {
    "age": {"max_age_days": 365},
    "fifo": {"fifo_per_user_kind": 3},
    "importance": {"importance_cap": 5},
    "size": {"max_mb_per_user": 0.001},
}


def seed(project, user="alice", spec=ALICE):
    """``spec``'s memories of ``user`` (None: without a user), by name."""
    now = timezone.now()
    end_user = None
    if user is not None:
        end_user, _ = EndUser.objects.get_or_create(project=project, external_id=user)
    rows = {}
    for name, (kind, days, score, fields) in spec.items():
        text = f"{user} {name} remembers tea ".ljust(CONTENT_BYTES, "x")
        rows[name] = Memory(
            project=project,
            end_user=end_user,
            kind=kind,
            content=text,
            content_hash=content_hash(text),
            created_at=now - timedelta(days=days),
            importance_score=score,
            embedding_status="done",
            **fields,
        )
    Memory.objects.bulk_create(rows.values())
    return rows


def policy_set(project, **values):
    project_settings_update(project=project, changes={"pruning": values}, actor=SYSTEM)


def names(rows, ids):
    by_id = {memory.pk: name for name, memory in rows.items()}
    return [by_id[memory_id] for memory_id in ids]


def statuses(rows):
    stored = dict(
        Memory.objects.filter(pk__in=[m.pk for m in rows.values()]).values_list("pk", "status")
    )
    return {name: stored.get(memory.pk) for name, memory in rows.items()}


def test_the_dry_run_reports_exactly_what_the_real_run_prunes(owner):
    rows = seed(owner.project)
    policy_set(owner.project, **POLICY)
    dry = prune_run(project=owner.project, actor=SYSTEM, dry_run=True)
    assert (dry.task, dry.dry_run, dry.status) == ("prune", True, "ok")
    assert dry.counts == {"age": 2, "fifo": 4, "importance": 1, "size": 1, "total": 8}
    assert all(status == rows[name].status for name, status in statuses(rows).items())
    assert not MemoryRevision.objects.exists()  # a dry run changes nothing

    real = prune_run(project=owner.project, actor=SYSTEM)
    assert (real.dry_run, real.status) == (False, "ok")
    assert real.details["ids"] == dry.details["ids"]
    assert real.details["truncated"] is False
    assert real.counts == {**dry.counts, "skipped": 0}
    pruned = {name for name, status in statuses(rows).items() if status == "pruned"}
    assert pruned == {"m1", "m2", "m3", "m5", "m6", "m7", "m9", "f1"}
    assert statuses(rows)["f3"] == "superseded"
    assert {statuses(rows)[name] for name in ("m4", "f4", "m8", "f2")} == {"active"}

    revisions = MemoryRevision.objects.filter(action="prune")
    assert sorted(str(r.memory_id) for r in revisions) == sorted(
        str(rows[name].pk) for name in pruned
    )
    m5 = revisions.get(memory_id=rows["m5"].pk)
    assert (m5.actor_type, m5.actor) == ("system", "prune")
    assert (m5.before["status"], m5.after["status"]) == ("archived", "pruned")
    assert m5.before["content"] == rows["m5"].content

    # nothing left to choose: a second run prunes nothing
    assert prune_run(project=owner.project, actor=SYSTEM).counts["total"] == 0


def test_a_run_of_one_user_touches_no_other_user_nor_project(owner, outsider):
    rows = seed(owner.project)
    bob = seed(owner.project, user="bob")
    nobody = seed(owner.project, user=None)
    theirs = seed(outsider.project)
    for project in (owner.project, outsider.project):
        policy_set(project, **POLICY)
    alice = EndUser.objects.get(project=owner.project, external_id="alice")

    run = prune_run(project=owner.project, actor=SYSTEM, end_user=alice)
    assert run.details["user"] == "alice"
    assert run.counts["total"] == 8
    assert sum(status == "pruned" for status in statuses(rows).values()) == 8
    for untouched in (bob, nobody, theirs):
        assert "pruned" not in statuses(untouched).values()

    # the project's run takes bob's and the user-less memories (one more "user"), each
    # group on its own, and still not the other project's
    run = prune_run(project=owner.project, actor=SYSTEM)
    assert run.counts["total"] == 16
    assert sum(status == "pruned" for status in statuses(bob).values()) == 8
    assert sum(status == "pruned" for status in statuses(nobody).values()) == 8
    assert "pruned" not in statuses(theirs).values()


def test_a_crash_mid_run_leaves_nothing_pruned_and_the_run_failed(owner, monkeypatch):
    rows = seed(owner.project)
    policy_set(owner.project, **POLICY)
    monkeypatch.setattr(pruning, "APPLY_CHUNK", 1)
    applied = []
    chunk_prune = pruning._chunk_prune

    def crashing(**kwargs):
        if len(applied) == 3:  # three rows already pruned in this transaction
            raise RuntimeError("worker killed")
        applied.append(chunk_prune(**kwargs))
        return applied[-1]

    monkeypatch.setattr(pruning, "_chunk_prune", crashing)
    with pytest.raises(RuntimeError, match="worker killed"):
        prune_run(project=owner.project, actor=SYSTEM)
    assert "pruned" not in statuses(rows).values()
    assert not MemoryRevision.objects.exists()
    run = MaintenanceRun.objects.get()
    assert (run.status, run.error) == ("failed", "RuntimeError: worker killed")
    assert run.finished_at is not None

    monkeypatch.setattr(pruning, "_chunk_prune", chunk_prune)  # the next run does it all
    assert prune_run(project=owner.project, actor=SYSTEM).counts["total"] == 8


def test_rows_changed_since_the_plan_are_skipped(owner, monkeypatch):
    rows = seed(owner.project)
    policy_set(owner.project, **POLICY)
    stale = prune_plan(project=owner.project)
    Memory.objects.filter(pk=rows["m1"].pk).update(pinned=True)  # an operator pins it
    Memory.objects.filter(pk=rows["m6"].pk).update(status="archived")  # summarized (fifo)
    monkeypatch.setattr(pruning, "prune_plan", lambda **kwargs: stale)
    run = prune_run(project=owner.project, actor=SYSTEM)
    assert run.counts == {"age": 1, "fifo": 3, "importance": 1, "size": 1, "total": 6, "skipped": 2}
    assert statuses(rows)["m1"] == "active"
    assert statuses(rows)["m6"] == "archived"


def test_progress_follows_the_memories_applied(owner, monkeypatch):
    seed(owner.project)
    policy_set(owner.project, **POLICY)
    monkeypatch.setattr(pruning, "APPLY_CHUNK", 3)
    calls = []
    prune_run(project=owner.project, actor=SYSTEM, progress=lambda *call: calls.append(call))
    # per policy in chunks of 3: age 2, fifo 3 + 1, importance 1, size 1
    assert calls == [(2, 8), (5, 8), (6, 8), (7, 8), (8, 8)]


def test_the_details_list_at_most_detail_ids_max_ids(owner, monkeypatch):
    seed(owner.project)
    policy_set(owner.project, **POLICY)
    monkeypatch.setattr(pruning, "DETAIL_IDS_MAX", 5)
    run = prune_run(project=owner.project, actor=SYSTEM, dry_run=True)
    assert [len(run.details["ids"][p]) for p in ("age", "fifo", "importance", "size")] == [
        2,
        3,
        0,
        0,
    ]
    assert run.details["truncated"] is True
    assert run.counts["total"] == 8  # the counts stay exact


def _embed(memories):
    space, _ = EmbeddingSpace.objects.get_or_create(provider="hashing", model="t", dimension=3)
    Embedding.objects.bulk_create(
        [Embedding(memory=m, space=space, vector=[1.0, 0.0, 0.0]) for m in memories]
    )


def test_the_purge_deletes_only_memories_pruned_longer_than_the_retention_ago(owner, outsider):
    spec = {name: ("message", 50, 0.5, {}) for name in ("old", "recent", "active")}
    rows = seed(owner.project, spec=spec)
    theirs = seed(outsider.project, spec=spec)
    everything = [*rows.values(), *theirs.values()]
    _embed(everything)
    long_ago = timezone.now() - timedelta(days=31)
    for group in (rows, theirs):
        Memory.objects.filter(pk=group["old"].pk).update(status="pruned", updated_at=long_ago)
        Memory.objects.filter(pk=group["recent"].pk).update(
            status="pruned", updated_at=timezone.now() - timedelta(days=29)
        )
        Memory.objects.filter(pk=group["active"].pk).update(updated_at=long_ago)

    assert pruned_purge(project=owner.project, actor=SYSTEM) == 1  # 30 days by default
    assert statuses(rows) == {"old": None, "recent": "pruned", "active": "active"}
    assert not Embedding.objects.filter(memory_id=rows["old"].pk).exists()
    assert Embedding.objects.count() == len(everything) - 1
    assert set(statuses(theirs).values()) == {"pruned", "active"}  # the other project's stay
    revision = MemoryRevision.objects.get(action="delete")
    erased = {"erased": "pruning purge"}
    assert (revision.memory_id, revision.actor, revision.after) == (rows["old"].pk, "prune", erased)
    assert revision.before["status"] == "pruned"
    said = hashlib.sha256(rows["old"].content.encode()).hexdigest()
    assert (revision.before["content_sha256"], "content" in revision.before) == (said, False)

    assert pruned_purge(project=owner.project, actor=SYSTEM, retention_days=28) == 1
    assert statuses(rows)["recent"] is None


def test_a_run_with_purge_counts_it_and_a_dry_run_says_what_it_would_purge(owner):
    rows = seed(owner.project, spec={"gone": ("message", 50, 0.5, {})})
    Memory.objects.filter(pk=rows["gone"].pk).update(
        status="pruned", updated_at=timezone.now() - timedelta(days=40)
    )
    dry = prune_run(project=owner.project, actor=SYSTEM, dry_run=True, purge=True)
    counts = {"age": 0, "fifo": 0, "importance": 0, "size": 0, "total": 0, "purged": 1}
    assert dry.counts == {**counts, "trash_purged": 0}  # the trash's grace: trash tests
    assert statuses(rows) == {"gone": "pruned"}
    real = prune_run(project=owner.project, actor=SYSTEM, purge=True)
    assert real.counts["purged"] == 1
    assert statuses(rows) == {"gone": None}


def test_the_beat_task_prunes_and_purges_each_project_in_its_own_run(owner, outsider):
    rows = seed(owner.project)
    policy_set(owner.project, **POLICY)
    idle = seed(outsider.project)  # no policy, nothing to purge yet: no run at all
    Memory.objects.filter(pk=idle["m1"].pk).update(status="pruned")
    assert prune_task() == 8
    assert sum(status == "pruned" for status in statuses(rows).values()) == 8
    assert list(statuses(idle).values()).count("pruned") == 1
    [run] = MaintenanceRun.objects.all()
    assert (run.project, run.task, run.dry_run, run.status) == (owner.project, "prune", False, "ok")
    assert run.counts["purged"] == 0

    # policies off, pruned memories older than the retention: the purge still runs
    policy_set(owner.project, **dict.fromkeys(POLICY))
    Memory.objects.filter(status="pruned").update(updated_at=timezone.now() - timedelta(days=31))
    assert prune_task() == 0
    assert sum(status is None for status in statuses(rows).values()) == 8
    assert list(statuses(idle).values()).count(None) == 1  # the other project's, in its run
    runs = MaintenanceRun.objects.order_by("pk")[1:]
    assert [(run.project, run.counts["purged"]) for run in runs] == [
        (owner.project, 8),
        (outsider.project, 1),
    ]


def test_a_queued_run_is_carried_out_once_in_its_own_row(owner, django_capture_on_commit_callbacks):
    rows = seed(owner.project)
    policy_set(owner.project, **POLICY)
    actor = Actor.api_key("mh_test")
    alice = EndUser.objects.get(project=owner.project, external_id="alice")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        queued = prune_enqueue(project=owner.project, actor=actor, end_user=alice)
    assert len(callbacks) == 1  # sent once the caller's transaction commits
    assert (queued.status, queued.dry_run, queued.details["user"]) == ("running", False, "alice")

    run = prune_queued_run(run_id=queued.pk)
    assert run.pk == queued.pk and MaintenanceRun.objects.count() == 1
    assert (run.status, run.counts["total"], run.counts["purged"]) == ("ok", 8, 0)
    assert sum(status == "pruned" for status in statuses(rows).values()) == 8
    assert set(MemoryRevision.objects.values_list("actor", flat=True)) == {"mh_test"}
    assert prune_queued_run(run_id=queued.pk) is None  # a redelivered message: done already


def test_a_run_the_broker_cannot_take_is_recorded_failed(
    owner, monkeypatch, django_capture_on_commit_callbacks
):
    def unreachable(*args, **kwargs):
        raise ConnectionError("Error 111 connecting to redis")

    monkeypatch.setattr(current_app, "send_task", unreachable)
    with (
        pytest.raises(pruning.PruneQueueUnavailable),
        django_capture_on_commit_callbacks(execute=True),
    ):
        prune_enqueue(project=owner.project, actor=SYSTEM)
    run = MaintenanceRun.objects.get()
    assert run.status == "failed" and "Error 111" in run.error


def test_the_admin_shows_the_runs_read_only(admin_client, owner):
    seed(owner.project)
    policy_set(owner.project, **POLICY)
    run = prune_run(project=owner.project, actor=SYSTEM, dry_run=True)
    page = admin_client.get("/admin/memories/maintenancerun/", {"task": "prune"})
    assert page.status_code == 200
    for count in (b"age: 2", b"fifo: 4", b"importance: 1", b"size: 1", b"total: 8"):
        assert count in page.content
    assert admin_client.get("/admin/memories/maintenancerun/add/").status_code == 403
    detail = admin_client.get(f"/admin/memories/maintenancerun/{run.pk}/change/")
    assert detail.status_code == 200 and b'name="_save"' not in detail.content
