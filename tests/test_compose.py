"""docker-compose.yml, read as Docker Compose reads it (no Docker here): the single-machine
stack, and the scale profile that docker/scale.env turns on (issue 43). Variables are
substituted as Compose does (``${NAME:-default}``, ``$$``), from docker/scale.env for the
scale profile. With the ``docker compose`` plugin installed, its own ``config`` runs too."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings

BASE_DIR = Path(settings.BASE_DIR)
COMPOSE = BASE_DIR / "docker-compose.yml"
SCALE_ENV = BASE_DIR / "docker" / "scale.env"
SINGLE = {"db", "redis", "web", "worker-embed", "worker-derived", "beat"}
SCALE = {"web-2", "lb", "worker-ingestion", "worker-maintenance", "db-replica"}
# ${NAME}, ${NAME:-default}, ${NAME:?message}, $$; the compose file's own text only
VARIABLE = re.compile(r"\$\$|\$\{([A-Z0-9_]+)(?:(:-|:\?)([^}]*))?\}")


def env_file(path: Path) -> dict[str, str]:
    lines = [line.strip() for line in path.read_text().splitlines()]
    pairs = (line.partition("=") for line in lines if line and not line.startswith("#"))
    return {name: value for name, _, value in pairs}


def substitute(value: Any, environment: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {key: substitute(item, environment) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, environment) for item in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, how, default = match.groups()
        if environment.get(name):
            return environment[name]
        assert how != ":?", f"{name} is required: {default}"
        return default or ""

    return VARIABLE.sub(one, value)


def compose(environment: dict[str, str] | None = None) -> dict[str, Any]:
    """The services Compose would run with ``environment`` (its profiles applied)."""
    environment = environment or {}
    services = substitute(yaml.safe_load(COMPOSE.read_text()), environment)["services"]
    active = set(environment.get("COMPOSE_PROFILES", "").split(",")) - {""}
    return {
        name: service
        for name, service in services.items()
        if not service.get("profiles") or active & set(service["profiles"])
    }


def command_of(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return command.split() if isinstance(command, str) else command


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def queues_by_worker(services: dict[str, Any]) -> dict[str, list[str]]:
    workers = {
        name: command_of(service)
        for name, service in services.items()
        if command_of(service)[:4] == ["celery", "-A", "memoryhub", "worker"]
    }
    return {name: consumed(command) for name, command in workers.items()}


def consumed(command: list[str]) -> list[str]:
    """The queues a worker's command consumes: --queues less --exclude-queues."""
    excluded = (
        option(command, "--exclude-queues").split(",") if "--exclude-queues" in command else []
    )
    return [queue for queue in option(command, "--queues").split(",") if queue not in excluded]


def test_the_single_machine_stack_is_what_it_was() -> None:
    services = compose()
    assert set(services) == SINGLE
    assert queues_by_worker(services) == {
        "worker-embed": ["default"],
        "worker-derived": ["derived", "ingestion", "maintenance"],
    }
    assert services["web"]["environment"]["DATABASE_REPLICA_URLS"] == ""  # no replica
    assert "migrate" in services["web"]["command"]


def test_the_scale_profile_adds_its_services() -> None:
    services = compose(env_file(SCALE_ENV))
    assert set(services) == SINGLE | SCALE
    for name in SCALE:
        assert services[name]["profiles"] == ["scale"]


def test_every_service_restarts_and_has_a_health_check() -> None:
    for name, service in compose(env_file(SCALE_ENV)).items():
        assert service["restart"] == "unless-stopped", name
        test = service["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, name


def test_each_queue_has_a_worker_of_its_own_in_the_scale_profile() -> None:
    queues = queues_by_worker(compose(env_file(SCALE_ENV)))
    assert queues == {
        "worker-embed": ["default"],
        "worker-derived": ["derived"],
        "worker-ingestion": ["ingestion"],
        "worker-maintenance": ["maintenance"],
    }
    declared = sorted(queue.name for queue in settings.CELERY_TASK_QUEUES)
    assert sorted(queue for names in queues.values() for queue in names) == declared


def test_each_worker_is_pinged_by_its_own_hostname() -> None:
    for name, service in compose(env_file(SCALE_ENV)).items():
        command = command_of(service)
        if command[:4] != ["celery", "-A", "memoryhub", "worker"]:
            continue
        prefix = option(command, "--hostname").removesuffix("%h")
        assert prefix == name.removeprefix("worker-") + "@"
        assert f"--destination {prefix}$HOSTNAME" in service["healthcheck"]["test"][1]


def test_one_beat_and_it_takes_the_lock() -> None:
    services = compose(env_file(SCALE_ENV))
    beats = [name for name, service in services.items() if "beat" in command_of(service)]
    assert beats == ["beat"]
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1
    # the lock a second beat would wait for is taken at every beat's start
    from memoryhub import celery

    assert "beat_lock_hold" in Path(celery.__file__).read_text()


def test_two_web_processes_read_from_the_replica_behind_the_balancer() -> None:
    services = compose(env_file(SCALE_ENV))
    for name in ("web", "web-2"):
        urls = services[name]["environment"]["DATABASE_REPLICA_URLS"]
        assert urls == "postgres://memoryhub:memoryhub@db-replica:5432/memoryhub"
        assert services[name]["environment"]["DATABASE_URL"].endswith("@db:5432/memoryhub")
        assert "/health/" in services[name]["healthcheck"]["test"][-1]
    assert "migrate" not in command_of(services["web-2"])  # web migrates, web-2 waits for it
    assert services["web-2"]["depends_on"]["web"]["condition"] == "service_healthy"
    for name in ("worker-embed", "worker-derived", "worker-ingestion", "beat"):
        assert "DATABASE_REPLICA_URLS" not in services[name]["environment"]  # primary only
    nginx = (BASE_DIR / "docker" / "nginx.conf").read_text()
    assert re.findall(r"server (\S+):8000", nginx) == ["web", "web-2"]
    mount = "./docker/nginx.conf:/etc/nginx/conf.d/default.conf:ro"
    assert mount in services["lb"]["volumes"]


def test_the_replica_streams_from_the_primary() -> None:
    services = compose(env_file(SCALE_ENV))
    replica, primary = services["db-replica"], services["db"]
    assert replica["image"] == primary["image"]  # the same PostgreSQL and pgvector
    assert replica["depends_on"]["db"]["condition"] == "service_healthy"
    assert "pg_is_in_recovery()" in replica["healthcheck"]["test"][1]
    assert (
        replica["environment"]["REPLICATION_PASSWORD"]
        == (primary["environment"]["REPLICATION_PASSWORD"])
    )
    assert "hot_standby=on" in replica["command"]
    assert any(part.startswith("wal_keep_size=") for part in primary["command"])
    entrypoint = (BASE_DIR / "docker" / "replica-entrypoint.sh").read_text()
    assert "pg_basebackup" in entrypoint and "--write-recovery-conf" in entrypoint
    assert replica["entrypoint"] == ["/docker/replica-entrypoint.sh"]
    init = "./docker/primary-init.sh:/docker-entrypoint-initdb.d/10-replication.sh:ro"
    assert init in primary["volumes"]
    primary_init = (BASE_DIR / "docker" / "primary-init.sh").read_text()
    assert "REPLICATION" in primary_init and "host replication" in primary_init


def test_redis_persists_the_queues() -> None:
    command = compose()["redis"]["command"]
    assert option(command, "--appendonly") == "yes"
    assert option(command, "--appendfsync") == "everysec"
    assert "redisdata:/data" in compose()["redis"]["volumes"]


@pytest.mark.parametrize("script", ["primary-init.sh", "replica-entrypoint.sh"])
def test_the_scripts_are_executable_shell(script: str) -> None:
    path = BASE_DIR / "docker" / script
    assert path.stat().st_mode & 0o111
    assert subprocess.run(["sh", "-n", str(path)], capture_output=True).returncode == 0


def test_the_primarys_init_script_makes_the_replication_role(
    tmp_path: Path, redis_server: object
) -> None:
    """docker/primary-init.sh run as the image runs it (psql as POSTGRES_USER), here on
    the test session's embedded PostgreSQL and a scratch pg_hba.conf."""
    import psycopg

    from memoryhub import embedded
    from memoryhub.embedded_standby import _bin_path

    server = embedded.postgres_start()
    binaries = _bin_path()  # the embedded server's own client programs
    (tmp_path / "pg_hba.conf").write_text("local all all trust\n")
    role = f"replicator_{os.getpid()}"
    environment = {
        "PATH": f"{binaries}:{os.environ['PATH']}",
        "PGHOST": server.socket_dir,
        "PGDATA": str(tmp_path),
        "POSTGRES_USER": "postgres",
        "POSTGRES_DB": "postgres",
        "REPLICATION_USER": role,
        "REPLICATION_PASSWORD": "it's secret",  # quoted as a literal, not as SQL
    }
    script = str(BASE_DIR / "docker" / "primary-init.sh")
    try:
        for _ in range(2):  # a role made already is left as it is
            done = subprocess.run([script], env=environment, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
        with psycopg.connect(host=server.socket_dir, user="postgres", dbname="postgres") as db:
            found = db.execute(
                "SELECT rolreplication, rolcanlogin, rolpassword LIKE 'SCRAM-SHA-256$%%' "
                "FROM pg_authid WHERE rolname = %s",
                [role],
            ).fetchone()
        assert found == (True, True, True)
        hba = (tmp_path / "pg_hba.conf").read_text().splitlines()
        assert f"host replication {role} all scram-sha-256" in hba
    finally:
        with psycopg.connect(
            host=server.socket_dir, user="postgres", dbname="postgres", autocommit=True
        ) as db:
            db.execute(f'DROP ROLE IF EXISTS "{role}"')


def shim(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_the_replica_copies_the_primary_once_then_runs_as_a_standby(
    tmp_path: Path, redis_server: object
) -> None:
    """docker/replica-entrypoint.sh against the test session's embedded PostgreSQL as
    the primary (its socket folder as PRIMARY_HOST): the image's gosu and
    docker-entrypoint.sh are stand-ins that run the command and record the hand-over."""
    from memoryhub import embedded
    from memoryhub.embedded_standby import _bin_path

    server = embedded.postgres_start()
    binaries = _bin_path()  # the embedded server's own pg_basebackup
    shims = tmp_path / "bin"
    shims.mkdir()
    shim(shims, "gosu", 'shift; exec "$@"')  # gosu USER COMMAND...: as root here
    shim(shims, "docker-entrypoint.sh", f'echo "$@" >> {tmp_path}/handed-over')
    pgdata = tmp_path / "replica"
    environment = {
        "PATH": f"{shims}:{binaries}:{os.environ['PATH']}",
        "PGDATA": str(pgdata),
        "PRIMARY_HOST": server.socket_dir,
        "REPLICATION_USER": "postgres",  # the embedded server trusts local replication
        "REPLICATION_PASSWORD": "unused",
    }
    script = str(BASE_DIR / "docker" / "replica-entrypoint.sh")
    command = [script, "postgres", "-c", "hot_standby=on"]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (pgdata / "PG_VERSION").is_file() and (pgdata / "standby.signal").is_file()
    assert "primary_conninfo" in (pgdata / "postgresql.auto.conf").read_text()
    assert pgdata.stat().st_mode & 0o777 == 0o700
    copied = (pgdata / "PG_VERSION").stat().st_mtime
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (pgdata / "PG_VERSION").stat().st_mtime == copied  # not copied again
    handed_over = (tmp_path / "handed-over").read_text().splitlines()
    assert handed_over == ["postgres -c hot_standby=on"] * 2
    shutil.rmtree(pgdata)  # a copy of the whole test server: no need to keep it


def test_docker_compose_config_accepts_it() -> None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"],
                                        capture_output=True).returncode != 0:  # fmt: skip
        pytest.skip("no docker compose plugin on this machine")
    for arguments in ([], ["--env-file", str(SCALE_ENV)]):
        done = subprocess.run(
            [docker, "compose", "-f", str(COMPOSE), *arguments, "config", "--quiet"],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
