"""The trash (memories.services.trash): an operator's forget hides a memory from search
and contexts, the undo puts it back with the status it had, and the pruning purge erases
it after ``pruning.trash_days``, not before."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.utils import timezone

from memories.models import Embedding, EndUser, Memory, MemoryRevision, content_hash
from memories.services.configuration import project_settings_update
from memories.services.pruning import prune_run, pruning_due
from memories.services.revisions import Actor
from memories.services.search import SearchFilters, memory_search
from memories.services.trash import memories_trash, memories_untrash, trash_count, trash_purge
from tests.conftest import embed_pending

ANNA = Actor.operator("anna")
SYSTEM = Actor.system("prune")


def memories_of(project, *specs, user="maria"):
    """(text, status) memories of one user, in order."""
    end_user, _ = EndUser.objects.get_or_create(project=project, external_id=user)
    rows = [
        Memory(
            project=project,
            end_user=end_user,
            kind="message",
            role="user",
            content=text,
            content_hash=content_hash(text),
            status=status,
        )
        for text, status in specs
    ]
    return Memory.objects.bulk_create(rows)


def status_of(memory):
    row = Memory.objects.filter(pk=memory.pk).values_list("status", flat=True).first()
    return row


def keyword_hits(project, query):
    result = memory_search(project=project, query=query, mode="keyword", filters=SearchFilters())
    return [hit.memory.pk for hit in result.hits]


def test_a_trashed_memory_leaves_search_and_the_undo_brings_back_its_status(owner):
    kept, archived = memories_of(
        owner.project, ("she adopted a beagle", "active"), ("beagle walks at dawn", "archived")
    )
    assert keyword_hits(owner.project, "beagle") == [kept.pk]
    assert memories_trash(project=owner.project, ids=[kept.pk, archived.pk], actor=ANNA) == 2
    assert (status_of(kept), status_of(archived)) == ("trashed", "trashed")
    assert keyword_hits(owner.project, "beagle") == []
    assert trash_count(project=owner.project) == 2
    # trashing again changes nothing and records nothing
    assert memories_trash(project=owner.project, ids=[kept.pk], actor=ANNA) == 0

    assert memories_untrash(project=owner.project, ids=[kept.pk, archived.pk], actor=ANNA) == 2
    assert (status_of(kept), status_of(archived)) == ("active", "archived")
    assert keyword_hits(owner.project, "beagle") == [kept.pk]
    actions = list(
        MemoryRevision.objects.filter(memory_id=kept.pk)
        .order_by("created_at", "pk")
        .values_list("action", "intent", "actor")
    )
    assert actions == [("trash", "", "anna"), ("update", "undo", "anna")]


def test_another_projects_memory_is_neither_trashed_nor_restored(owner, outsider):
    (theirs,) = memories_of(outsider.project, ("their secret", "active"))
    assert memories_trash(project=owner.project, ids=[theirs.pk], actor=ANNA) == 0
    assert status_of(theirs) == "active"
    memories_trash(project=outsider.project, ids=[theirs.pk], actor=ANNA)
    assert memories_untrash(project=owner.project, ids=[theirs.pk], actor=ANNA) == 0
    assert status_of(theirs) == "trashed"


def test_the_purge_erases_only_what_waited_past_the_grace(owner):
    old, recent = memories_of(owner.project, ("old secret", "active"), ("new secret", "active"))
    memories_trash(project=owner.project, ids=[old.pk, recent.pk], actor=ANNA)
    Memory.objects.filter(pk=old.pk).update(updated_at=timezone.now() - timedelta(days=8))
    assert pruning_due(project=owner.project)  # the beat has work: the trash's

    run = prune_run(project=owner.project, actor=SYSTEM, purge=True)
    assert run.counts["trash_purged"] == 1
    assert (status_of(old), status_of(recent)) == (None, "trashed")
    erased = MemoryRevision.objects.get(memory_id=old.pk, action="delete")
    assert erased.after == {"erased": "trash purge"}
    said = hashlib.sha256(b"old secret").hexdigest()
    assert (erased.before["content_sha256"], "content" in erased.before) == (said, False)
    # the earlier revisions keep no words either
    assert not MemoryRevision.objects.filter(memory_id=old.pk, before__content="old secret")
    assert not MemoryRevision.objects.filter(memory_id=old.pk, after__content="old secret")


def test_the_grace_is_the_projects_setting(owner):
    (memory,) = memories_of(owner.project, ("short grace", "active"))
    memories_trash(project=owner.project, ids=[memory.pk], actor=ANNA)
    Memory.objects.filter(pk=memory.pk).update(updated_at=timezone.now() - timedelta(hours=2))
    assert trash_purge(project=owner.project, actor=SYSTEM) == 0  # 7 days by default
    project_settings_update(
        project=owner.project, changes={"pruning": {"trash_days": 0.05}}, actor=ANNA
    )
    assert trash_purge(project=owner.project, actor=SYSTEM) == 1
    assert status_of(memory) is None


def test_the_undo_works_only_within_the_grace_and_keeps_the_vectors(owner):
    late, early = memories_of(owner.project, ("too late", "active"), ("in time", "active"))
    Memory.objects.filter(pk__in=[late.pk, early.pk]).update(embedding_status="pending")
    assert embed_pending() == 2
    vectors = list(Embedding.objects.filter(memory=early).values_list("pk", flat=True))
    assert vectors
    memories_trash(project=owner.project, ids=[late.pk, early.pk], actor=ANNA)
    Memory.objects.filter(pk=late.pk).update(updated_at=timezone.now() - timedelta(days=8))
    assert memories_untrash(project=owner.project, ids=[late.pk, early.pk], actor=ANNA) == 1
    assert (status_of(late), status_of(early)) == ("trashed", "active")
    assert list(Embedding.objects.filter(memory=early).values_list("pk", flat=True)) == vectors
    assert keyword_hits(owner.project, "time") == [early.pk]
