"""The user synopsis read, refreshed and edited (memories/services/synopsis.py, its
Redis cache and its refresh flags) around the generator: TTLs, refresh on access (one
task for a burst of reads, none when off), edit and lock, the cache kept true on
writes, the admin's actions."""

from __future__ import annotations

import pytest
from django.test import override_settings
from django.utils import timezone

from memories.models import Synopsis, SynopsisRevision
from memories.services.synopsis import (
    SynopsisDraft,
    SynopsisError,
    synopsis_get,
    synopsis_part_edit,
    synopsis_part_lock,
    synopsis_refresh_request,
    synopsis_store,
)
from memories.services.synopsis_cache import CACHE_KEY, SynopsisStored, synopsis_cache_put
from memories.services.synopsis_refresh import QUEUED_FLAG, synopsis_refresh_dequeued
from synopsis.services.synopses import synopsis_generate
from tests.synopsis.synopsis_seeds import (
    ADMIN,
    IDENTITY,
    age,
    configure,
    maria,
    queued_tasks,
    seed_facts,
)

# every write puts the synopsis in the cache after its commit: tests commit for real
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_redis")]


def test_parts_go_stale_after_their_ttl_and_only_stale_parts_are_regenerated(owner, no_llm):
    seed_facts(owner)
    user = maria(owner)
    synopsis_generate(end_user_id=user.pk)
    view = synopsis_get(end_user=user, refresh_on_access=False)
    assert [p.freshness for p in view.parts] == ["fresh", "fresh"]
    assert synopsis_generate(end_user_id=user.pk) == []  # nothing due

    age(user, "context", minutes=61)  # context TTL: 1 hour
    age(user, "identity", days=6)  # identity TTL: 7 days
    view = synopsis_get(end_user=user, refresh_on_access=False)
    assert (view.identity.freshness, view.context.freshness) == ("fresh", "stale")
    assert view.context.age_seconds > view.context.ttl_seconds == 3600
    assert synopsis_generate(end_user_id=user.pk) == ["context"]

    age(user, "identity", days=2)
    assert synopsis_get(end_user=user, refresh_on_access=False).identity.freshness == "stale"
    assert synopsis_generate(end_user_id=user.pk) == ["identity"]

    configure(owner, context_ttl_hours=0.01)
    age(user, "context", seconds=40)  # 0.01 h = 36 s
    assert synopsis_get(end_user=maria(owner), refresh_on_access=False).context.freshness == "stale"


def test_a_burst_of_stale_reads_queues_one_task(owner, no_llm, redis_client):
    seed_facts(owner)
    user = maria(owner)
    views = [synopsis_get(end_user=user) for _ in range(5)]  # missing: refresh on access
    assert all(v.refresh_scheduled for v in views)
    assert [p.freshness for p in views[-1].parts] == ["missing", "missing"]
    assert queued_tasks(redis_client) == [
        ("synopsis.tasks.synopsis_generate_task", f"[{user.pk}, ['identity', 'context']]")
    ]
    assert redis_client.exists(QUEUED_FLAG.format(user.pk, "identity"))

    synopsis_refresh_dequeued(end_user_id=user.pk, parts=["identity", "context"])  # the task
    synopsis_generate(end_user_id=user.pk)
    redis_client.delete("derived")
    age(user, "context", hours=2)
    views = [synopsis_get(end_user=user) for _ in range(3)]
    assert views[0].context.freshness == "stale" and views[0].refresh_scheduled
    assert queued_tasks(redis_client) == [
        ("synopsis.tasks.synopsis_generate_task", f"[{user.pk}, ['context']]")
    ]


def test_with_refresh_on_access_off_a_stale_synopsis_is_served_and_nothing_queued(
    owner, no_llm, redis_client
):
    seed_facts(owner)
    user = maria(owner)
    synopsis_generate(end_user_id=user.pk)
    age(user, "identity", days=8)
    configure(owner, refresh_on_access=False)
    user = maria(owner)
    view = synopsis_get(end_user=user)
    assert view.identity.freshness == "stale" and view.identity.text == IDENTITY
    assert not view.refresh_scheduled and queued_tasks(redis_client) == []
    # the caller may ask for it all the same
    assert synopsis_get(end_user=user, refresh_on_access=True).refresh_scheduled
    assert len(queued_tasks(redis_client)) == 1


def test_an_edit_locks_the_part_and_generation_leaves_it_until_unlocked(owner, no_llm):
    seed_facts(owner)
    user = maria(owner)
    synopsis_generate(end_user_id=user.pk)
    synopsis_part_edit(end_user=user, part="identity", text="Maria, a pianist.", actor=ADMIN)
    row = Synopsis.objects.get(end_user=user)
    assert (row.identity_text, row.identity_generator, row.identity_locked) == (
        "Maria, a pianist.",
        "operator",
        True,
    )
    assert row.identity_edited_by == "operator:admin" and row.identity_source_ids == []

    age(user, "identity", days=30)
    view = synopsis_get(end_user=user, refresh_on_access=False)
    assert view.identity.freshness == "fresh"  # locked: the operator's word holds
    assert synopsis_generate(end_user_id=user.pk, force=True) == ["context"]
    assert Synopsis.objects.get(end_user=user).identity_text == "Maria, a pianist."

    synopsis_part_lock(end_user=user, part="identity", locked=False, actor=ADMIN)
    assert synopsis_get(end_user=user, refresh_on_access=False).identity.freshness == "stale"
    assert synopsis_generate(end_user_id=user.pk) == ["identity"]
    assert Synopsis.objects.get(end_user=user).identity_text == IDENTITY
    trail = SynopsisRevision.objects.filter(end_user=user).order_by("created_at", "pk")
    assert [(r.part, r.action, r.actor) for r in trail] == [
        ("identity", "edit", "admin"),
        ("identity", "unlock", "admin"),
    ]
    assert trail[0].before["text"] == IDENTITY and trail[0].after["locked"] is True


def test_an_edit_may_leave_the_part_unlocked_and_must_fit_max_tokens(owner, no_llm):
    seed_facts(owner)
    user = maria(owner)
    synopsis_part_edit(end_user=user, part="context", text="Moving house.", actor=ADMIN, lock=False)
    assert Synopsis.objects.get(end_user=user).context_locked is False
    with pytest.raises(SynopsisError) as raised:
        synopsis_part_edit(end_user=user, part="context", text="word " * 400, actor=ADMIN)
    assert list(raised.value.errors) == ["context.text"]
    assert Synopsis.objects.get(end_user=user).context_text == "Moving house."


def test_a_draft_of_older_material_does_not_overwrite_a_newer_part(owner, no_llm):
    seed_facts(owner)
    user = maria(owner)
    old = timezone.now()
    synopsis_part_edit(end_user=user, part="identity", text="Newer.", actor=ADMIN, lock=False)
    draft = SynopsisDraft("identity", "Older.", "template", [], old)
    assert synopsis_store(end_user=user, drafts=[draft]) == []
    assert Synopsis.objects.get(end_user=user).identity_text == "Newer."


def test_the_cache_is_kept_true_by_every_write(owner, no_llm, redis_client):
    seed_facts(owner)
    user = maria(owner)
    assert synopsis_get(end_user=user, refresh_on_access=False).identity.text == ""
    cached = redis_client.hgetall(CACHE_KEY.format(user.pk))
    assert cached[b"version"] == b"0"  # no row yet: cached as such

    # a read is served from the cache: a change behind the services' back is not seen
    synopsis_generate(end_user_id=user.pk)
    assert synopsis_get(end_user=user, refresh_on_access=False).identity.text == IDENTITY
    Synopsis.objects.filter(end_user=user).update(identity_text="Changed by hand.")
    assert synopsis_get(end_user=user, refresh_on_access=False).identity.text == IDENTITY

    for write_ in (
        lambda: synopsis_part_edit(end_user=user, part="identity", text="Edited.", actor=ADMIN),
        lambda: synopsis_part_lock(end_user=user, part="identity", locked=False, actor=ADMIN),
        lambda: synopsis_generate(end_user_id=user.pk, force=True),
    ):
        write_()
        row = Synopsis.objects.get(end_user=user)
        view = synopsis_get(end_user=user, refresh_on_access=False)
        assert (view.identity.text, view.identity.locked) == (
            row.identity_text,
            row.identity_locked,
        )
        assert int(redis_client.hget(CACHE_KEY.format(user.pk), "version")) == row.version

    # a slow reader's older version never replaces a newer one
    row = Synopsis.objects.get(end_user=user)
    stale = SynopsisStored.of(row)
    older = SynopsisStored(row.version - 1, {**stale.parts, "identity": None})
    synopsis_cache_put(end_user_id=user.pk, stored=older)
    assert synopsis_get(end_user=user, refresh_on_access=False).identity.text == IDENTITY


def test_without_redis_a_read_comes_from_the_database_and_queues_nothing(owner, no_llm):
    seed_facts(owner)
    user = maria(owner)
    synopsis_generate(end_user_id=user.pk)
    age(user, "identity", days=8)
    with override_settings(REDIS_URL="unix:///nonexistent/redis.sock"):
        view = synopsis_get(end_user=user)
    assert view.identity.text == IDENTITY and view.identity.freshness == "stale"
    assert not view.refresh_scheduled


def test_a_forced_refresh_is_queued_even_when_one_is(owner, no_llm, redis_client):
    seed_facts(owner)
    user = maria(owner)
    assert synopsis_refresh_request(end_user=user, parts=["context"]) == ["context"]
    assert synopsis_refresh_request(end_user=user, parts=["context"]) == ["context"]
    assert len(queued_tasks(redis_client)) == 1  # the second found it queued
    synopsis_refresh_request(end_user=user, parts=["context"], force=True)
    assert queued_tasks(redis_client)[-1] == (
        "synopsis.tasks.synopsis_generate_task",
        f"[{user.pk}, ['context']]",
    )


def test_the_admin_locks_unlocks_and_regenerates_through_the_services(
    admin_client, owner, no_llm, redis_client
):
    seed_facts(owner)
    user = maria(owner)
    synopsis_generate(end_user_id=user.pk)
    row = Synopsis.objects.get(end_user=user)
    page = admin_client.get("/admin/memories/synopsis/")
    assert page.status_code == 200 and b"maria" in page.content
    assert admin_client.get(f"/admin/memories/synopsis/{row.pk}/change/").status_code == 200

    def act(action):
        response = admin_client.post(
            "/admin/memories/synopsis/", {"action": action, "_selected_action": [row.pk]}
        )
        assert response.status_code == 302

    act("lock_identity")
    assert synopsis_get(end_user=user, refresh_on_access=False).identity.locked
    act("regenerate")
    assert queued_tasks(redis_client) == [
        ("synopsis.tasks.synopsis_generate_task", f"[{user.pk}, ['context']]")
    ]
    act("unlock_identity")
    assert [(r.action, r.actor_type, r.actor) for r in SynopsisRevision.objects.order_by("pk")] == [
        ("lock", "operator", "admin"),
        ("unlock", "operator", "admin"),
    ]
    assert admin_client.get("/admin/memories/synopsisrevision/").status_code == 200
