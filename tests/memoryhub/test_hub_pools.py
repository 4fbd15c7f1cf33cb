"""`make run` starts two worker pools: embedding (queue default) in a process of its own,
derived memory, documents and maintenance in another, each with its concurrency
(WORKER_EMBED_CONCURRENCY, WORKER_DERIVED_CONCURRENCY, the hub's options); one worker on
every queue on request (WORKER_POOLS=single). docker-compose.yml runs the same pools
under the same hostnames, and /ready/ knows each pool by its hostname."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.test import Client

from memories.services.workers import worker_heartbeat
from memoryhub.management.commands.hub import Command
from tests.memoryhub.test_supervisor import hub_folder, hub_state_write  # noqa: F401

BASE_DIR = Path(__file__).resolve().parents[2]


def children(tmp_path: Path, *argv: str) -> dict[str, list[str]]:
    command = Command()
    options = vars(command.create_parser("manage.py", "hub").parse_args(list(argv)))
    return {child.name: child.command for child in command.children({}, options, tmp_path)}


def option(command: list[str], name: str) -> str | None:
    return command[command.index(name) + 1] if name in command else None


@pytest.fixture
def no_pool_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WORKER_POOLS", "WORKER_EMBED_CONCURRENCY", "WORKER_DERIVED_CONCURRENCY"):
        monkeypatch.delenv(name, raising=False)


def test_the_hub_starts_an_embedding_pool_apart_from_the_derived_one(tmp_path, no_pool_env):
    found = children(tmp_path)
    assert list(found) == ["web", "worker-embed", "worker-derived", "beat"]
    embed, derived = found["worker-embed"], found["worker-derived"]
    assert (option(embed, "--queues"), option(embed, "--hostname")) == ("default", "embed@%h")
    assert (option(derived, "--queues"), option(derived, "--hostname")) == (
        "derived,ingestion,maintenance",
        "derived@%h",
    )
    assert option(embed, "--concurrency") == option(derived, "--concurrency") == "1"


def test_every_queue_has_a_pool_and_only_one(tmp_path, no_pool_env):
    found = children(tmp_path)
    taken = [
        queue
        for name in ("worker-embed", "worker-derived")
        for queue in option(found[name], "--queues").split(",")
    ]
    assert sorted(taken) == sorted(queue.name for queue in settings.CELERY_TASK_QUEUES)


@pytest.mark.parametrize(
    ("env", "argv", "concurrency"),
    [
        ({"WORKER_EMBED_CONCURRENCY": "2", "WORKER_DERIVED_CONCURRENCY": "3"}, (), ("2", "3")),
        ({"WORKER_DERIVED_CONCURRENCY": "3"}, ("--derived-concurrency", "4"), ("1", "4")),
        ({}, ("--embed-concurrency", "2"), ("2", "1")),
    ],
)
def test_each_pool_has_its_own_concurrency(
    tmp_path, monkeypatch, no_pool_env, env, argv, concurrency
):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    found = children(tmp_path, *argv)
    assert (
        option(found["worker-embed"], "--concurrency"),
        option(found["worker-derived"], "--concurrency"),
    ) == concurrency


@pytest.mark.parametrize("argv", [("--worker-pools", "single"), ()])
def test_one_worker_on_every_queue_on_request(tmp_path, monkeypatch, no_pool_env, argv):
    if not argv:
        monkeypatch.setenv("WORKER_POOLS", "single")
    found = children(tmp_path, *argv, "--worker-concurrency", "2")
    assert list(found) == ["web", "worker", "beat"]
    worker = found["worker"]
    assert option(worker, "--queues") is None  # every queue
    assert (option(worker, "--hostname"), option(worker, "--concurrency")) == ("worker@%h", "2")


def test_docker_compose_runs_the_same_pools(tmp_path, no_pool_env):
    compose = yaml.safe_load((BASE_DIR / "docker-compose.yml").read_text())["services"]
    found = children(tmp_path)
    for name in ("worker-embed", "worker-derived"):
        command = compose[name]["command"]
        for flag in ("--queues", "--hostname"):
            assert option(command, flag) == option(found[name], flag), (name, flag)
        hostname = option(command, "--hostname").split("@")[0]
        assert f"--destination {hostname}@" in compose[name]["healthcheck"]["test"][1]
    assert "worker" not in compose


def test_ready_needs_both_pools_each_with_its_own_heartbeat(db, hub_folder):  # noqa: F811
    worker_heartbeat(hostname="embed@box")
    hub_state_write(hub_folder, **{"worker-embed": {}, "worker-derived": {}})
    response = Client().get("/ready/")
    assert response.status_code == 503  # the derived pool has sent none
    assert response.json()["checks"]["workers"]["service"] == "worker-derived"
    worker_heartbeat(hostname="derived@box")
    response = Client().get("/ready/")
    assert response.status_code == 200
    assert response.json()["services"] == {"worker-embed": "up", "worker-derived": "up"}

    hub_state_write(
        hub_folder,
        **{"worker-embed": {"state": "restarting", "restarts": 1}, "worker-derived": {}},
    )
    body = Client().get("/ready/").json()
    assert (body["status"], body["workers"]) == ("recovering", "down")
    assert body["restarts"] == {"worker-embed": 1, "worker-derived": 0}
