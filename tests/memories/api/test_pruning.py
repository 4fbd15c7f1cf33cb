"""POST /api/v1/prune/ (a dry run at once, a real run queued), GET /api/v1/prune/runs/
and /api/v1/prune/runs/{id}/: scopes, tenants, bad input, search afterwards, the
documented responses, and a real worker carrying out a queued run."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from memories.models import MaintenanceRun, Memory
from memories.services.pruning import prune_queued_run
from tests.conftest import wait_until
from tests.memories.api.test_openapi import _check
from tests.memories.services.test_pruning import POLICY, names, policy_set, seed, statuses

EXPECTED = {  # alice's memories the policies prune (tests/memories/services/test_pruning.py)
    "age": ["m5", "m1"],
    "fifo": ["m3", "m2", "m6", "m7"],
    "importance": ["f1"],
    "size": ["m9"],
}

COUNTS = {"age": 2, "fifo": 4, "importance": 1, "size": 1, "total": 8}


@pytest.fixture
def alice(owner):
    rows = seed(owner.project)
    policy_set(owner.project, **POLICY)
    return rows


def test_a_dry_run_answers_at_once_and_changes_nothing_even_with_a_read_key(owner, alice):
    response = owner.read_client.post("/api/v1/prune/", {"dry_run": True}, format="json")
    assert response.status_code == 200, response.content
    run = response.json()
    assert (run["task"], run["dry_run"], run["status"], run["user"]) == ("prune", True, "ok", None)
    assert run["counts"] == {**COUNTS, "purged": 0, "trash_purged": 0}
    assert {policy: names(alice, ids) for policy, ids in _uuids(run["ids"]).items()} == EXPECTED
    assert run["truncated"] is False
    assert "pruned" not in statuses(alice).values()
    # without dry_run it is a dry run too
    assert owner.client.post("/api/v1/prune/", {}, format="json").json()["dry_run"] is True


def _uuids(ids):
    return {policy: [uuid.UUID(i) for i in values] for policy, values in ids.items()}


def test_a_dry_run_of_one_user(owner, alice):
    bob = seed(owner.project, user="bob")
    run = owner.client.post("/api/v1/prune/", {"user": "bob"}, format="json").json()
    assert run["user"] == "bob"
    assert {policy: names(bob, ids) for policy, ids in _uuids(run["ids"]).items()} == EXPECTED


def test_a_real_run_needs_a_write_key_and_is_queued(
    owner, alice, django_capture_on_commit_callbacks
):
    response = owner.read_client.post("/api/v1/prune/", {"dry_run": False}, format="json")
    assert response.status_code == 403
    assert "read-only" in response.json()["detail"]
    assert not MaintenanceRun.objects.exists()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = owner.client.post("/api/v1/prune/", {"dry_run": False}, format="json")
    assert response.status_code == 202, response.content
    queued = response.json()
    assert (queued["dry_run"], queued["status"], queued["finished_at"]) == (False, "running", None)
    assert response["Location"] == f"/api/v1/prune/runs/{queued['id']}/"
    assert len(callbacks) == 1  # the task is sent once the run's row is committed

    prune_queued_run(run_id=queued["id"])  # what the worker does with the message
    run = owner.read_client.get(f"/api/v1/prune/runs/{queued['id']}/").json()
    assert run["status"] == "ok"
    assert run["counts"] == {**COUNTS, "skipped": 0, "purged": 0, "trash_purged": 0}
    assert {policy: names(alice, ids) for policy, ids in _uuids(run["ids"]).items()} == EXPECTED
    revisions = owner.client.get(f"/api/v1/memories/{alice['m1'].pk}/revisions/").json()
    actions = [(r["action"], r["actor"]) for r in revisions["results"]]
    assert ("prune", owner.key.prefix) in actions  # recorded as the key that asked


def test_pruned_memories_leave_search(owner, alice, django_capture_on_commit_callbacks):
    def found():
        response = owner.client.post(
            "/api/v1/search/",
            {"query": "remembers tea", "mode": "keyword", "user": "alice", "k": 50},
            format="json",
        )
        assert response.status_code == 200, response.content
        ids = [hit["memory"]["id"] for hit in response.json()["results"]]
        return sorted(names(alice, _uuids({"x": ids})["x"]))

    assert found() == ["f1", "f2", "f4", "m1", "m2", "m3", "m4", "m6", "m7", "m8", "m9"]
    with django_capture_on_commit_callbacks(execute=False):
        run_id = owner.client.post("/api/v1/prune/", {"dry_run": False}, format="json").json()["id"]
    prune_queued_run(run_id=run_id)
    assert found() == ["f2", "f4", "m4", "m8"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"dry_run": "perhaps"}, "dry_run"),
        ({"dry_run": None}, "dry_run"),
        ({"user": ""}, "user"),
        ({"user": "x" * 256}, "user"),
        ({"user": ["alice"]}, "user"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(owner, alice, body, field):
    response = owner.client.post("/api/v1/prune/", body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert not MaintenanceRun.objects.exists()


def test_another_projects_user_and_runs_are_404(owner, outsider, alice):
    seed(outsider.project, user="carol")
    response = owner.client.post("/api/v1/prune/", {"user": "carol"}, format="json")
    assert response.status_code == 404
    response = owner.client.post("/api/v1/prune/", {"user": "nobody"}, format="json")
    assert response.status_code == 404

    theirs = outsider.client.post("/api/v1/prune/", {}, format="json").json()
    mine = owner.client.post("/api/v1/prune/", {}, format="json").json()
    assert owner.client.get(f"/api/v1/prune/runs/{theirs['id']}/").status_code == 404
    assert owner.client.get(f"/api/v1/prune/runs/{mine['id']}/").status_code == 200
    listed = owner.read_client.get("/api/v1/prune/runs/").json()["results"]
    assert [run["id"] for run in listed] == [mine["id"]]
    assert outsider.client.get(f"/api/v1/prune/runs/{mine['id']}/").status_code == 404


def test_the_list_holds_the_last_50_prune_runs_newest_first_without_ids(owner):
    for _ in range(52):
        MaintenanceRun.objects.create(project=owner.project, task="prune", dry_run=True)
    MaintenanceRun.objects.create(project=owner.project, task="importance")
    listed = owner.client.get("/api/v1/prune/runs/").json()["results"]
    assert len(listed) == 50
    assert [run["id"] for run in listed] == sorted((run["id"] for run in listed), reverse=True)
    assert {run["task"] for run in listed} == {"prune"}
    assert "ids" not in listed[0]


def test_a_key_is_required(anonymous, owner):
    assert anonymous.post("/api/v1/prune/", {}, format="json").status_code == 401
    assert anonymous.get("/api/v1/prune/runs/").status_code == 401


def test_responses_match_the_document(owner, alice, django_capture_on_commit_callbacks):
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    assert {"pruning"} == set(schema["paths"]["/api/v1/prune/"]["post"]["tags"])
    dry = owner.client.post("/api/v1/prune/", {"user": "alice"}, format="json")
    _check(schema, "/api/v1/prune/", "post", dry)
    with django_capture_on_commit_callbacks(execute=False):
        queued = owner.client.post("/api/v1/prune/", {"dry_run": False}, format="json")
    _check(schema, "/api/v1/prune/", "post", queued)
    _check(schema, "/api/v1/prune/runs/", "get", owner.client.get("/api/v1/prune/runs/"))
    one = owner.client.get(f"/api/v1/prune/runs/{dry.json()['id']}/")
    _check(schema, "/api/v1/prune/runs/{run_id}/", "get", one)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_real_worker_carries_out_a_queued_run(owner, celery_worker_process):
    rows = seed(owner.project)
    policy_set(owner.project, **POLICY)
    response = owner.client.post("/api/v1/prune/", {"dry_run": False}, format="json")
    assert response.status_code == 202
    run_id = response.json()["id"]
    wait_until(lambda: MaintenanceRun.objects.get(pk=run_id).status != "running", timeout=60)
    run = MaintenanceRun.objects.get(pk=run_id)
    assert (run.status, run.counts["total"]) == ("ok", 8), run.error
    assert Memory.objects.filter(pk__in=[m.pk for m in rows.values()], status="pruned").count() == 8


def test_a_real_run_retried_with_its_idempotency_key_is_queued_once(
    owner, alice, django_capture_on_commit_callbacks
):
    headers = {"HTTP_IDEMPOTENCY_KEY": "prune-1"}
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        first = owner.client.post("/api/v1/prune/", {"dry_run": False}, format="json", **headers)
        again = owner.client.post("/api/v1/prune/", {"dry_run": False}, format="json", **headers)
    assert first.status_code == again.status_code == 202
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert MaintenanceRun.objects.count() == 1 and len(callbacks) == 1
