"""`make run`: the whole hub in one command.

Starts (or attaches to) the embedded PostgreSQL and Redis unless DATABASE_URL /
REDIS_URL point elsewhere, applies migrations, makes sure a demo project with an
API key and an operator login exist, then runs the web server (gunicorn), the Celery
worker pools (embedding apart from the rest: memoryhub/hub_services.py worker_pools) and
Celery beat until Ctrl-C or SIGTERM, which stops them all cleanly. Meanwhile it
supervises them and the embedded servers (memoryhub/supervisor.py): what dies is started
again with backoff; the children's output goes to the terminal and to
<data folder>/logs/<name>.log.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import checks
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from memories.services.projects import api_key_authenticate, api_key_create, project_get_or_create
from memoryhub import embedded
from memoryhub.hub_services import (
    OUTPUT_LOCK,
    ChildProcess,
    EmbeddedPostgresService,
    EmbeddedRedisService,
    WorkerPool,
    database_check,
    redis_check,
    worker_pools,
)
from memoryhub.supervisor import STATE_FILE, Probe, Supervisor, SupervisorGaveUp

DEMO_PROJECT = "demo"
DEMO_OPERATOR = "operator"


class Command(BaseCommand):
    help = "Run the hub: embedded services, migrations, demo credentials, web, workers and beat."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--web-workers", type=int, default=int(os.environ.get("WEB_WORKERS", "2"))
        )
        parser.add_argument(
            "--web-threads",
            type=int,
            default=int(os.environ.get("WEB_THREADS", "16")),
            help="threads per web process: enough that a write finds one free while "
            "searches wait for their slots (SEARCH_CONCURRENCY)",
        )
        parser.add_argument(
            "--embed-concurrency",
            type=int,
            default=int(os.environ.get("WORKER_EMBED_CONCURRENCY", "1")),
            help="processes of the embedding worker (queue default); one process already "
            "uses every core (EMBEDDING_TORCH_THREADS, EMBEDDING_LANES)",
        )
        parser.add_argument(
            "--derived-concurrency",
            type=int,
            default=int(os.environ.get("WORKER_DERIVED_CONCURRENCY", "1")),
            help="processes of the worker for derived memory, documents and maintenance "
            "(queues derived, ingestion, maintenance); more when an LLM does the work",
        )
        parser.add_argument(
            "--worker-pools",
            choices=["split", "single"],
            default=os.environ.get("WORKER_POOLS", "split"),
            help="split (default): the pools above; single: one worker on every queue "
            "(--worker-concurrency), one embedding model in memory instead of two",
        )
        parser.add_argument(
            "--worker-concurrency",
            type=int,
            default=int(os.environ.get("WORKER_CONCURRENCY", "1")),
            help="processes of the single worker (--worker-pools single)",
        )
        parser.add_argument("--no-demo", action="store_true", help="do not create demo credentials")

    def handle(self, *args: Any, **options: Any) -> None:
        redis = embedded.services_start(redis=True)
        folder = Path(settings.DATA_DIR)
        env = dict(os.environ)
        if settings.EMBEDDED_DATABASE:
            env["DATABASE_URL"] = embedded.postgres_start(folder).url
        if redis is not None:
            env["REDIS_URL"] = redis.url
        self.check_port_free(options["host"], options["port"])
        supervisor = Supervisor(
            probes=[
                Probe("database", database_check(env["DATABASE_URL"])),
                Probe("redis", redis_check(settings.REDIS_URL)),
            ],
            state_path=folder / STATE_FILE,
            say=self.say,
        )
        try:
            self.report_checks()
            call_command("migrate", interactive=False, verbosity=0)
            credentials = None if options["no_demo"] else self.demo_credentials()
            connections.close_all()
            stop = self.stop_on_signals()
            if settings.EMBEDDED_DATABASE:
                supervisor.watch(EmbeddedPostgresService(folder), start=False)
            if redis is not None:
                supervisor.watch(EmbeddedRedisService(folder, redis), start=False)
            children = self.children(env, options, folder)
            for child in children:
                supervisor.watch(child)
            base = f"http://{options['host']}:{options['port']}"
            self.wait_for_web(base, children[0], stop)
            self.print_banner(base, credentials, redis is not None)
            supervisor.run(stop)
            self.stdout.write("\nStopping MemoryHub…")
        except SupervisorGaveUp as exc:
            raise CommandError(str(exc)) from None
        finally:
            supervisor.stop_all()
            if redis is not None and "redis" not in supervisor.watches:
                redis.stop()
            self.stdout.write("MemoryHub stopped.")

    def say(self, message: str) -> None:
        """A line of the hub's own in its output, between its children's lines."""
        with OUTPUT_LOCK:
            self.stdout.write(f"hub   | {time.strftime('%H:%M:%S')} {message}")
            self.stdout.flush()

    def stop_on_signals(self) -> threading.Event:
        """Ctrl-C and SIGTERM set the event the supervisor stops on (children started
        from here on are in sessions of their own: the signals reach only the hub)."""
        stop = threading.Event()

        def request_stop(signum: int, frame: Any) -> None:
            stop.set()

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        return stop

    def report_checks(self) -> None:
        """The system checks' warnings (e.g. a setting that is no longer read)."""
        for message in checks.run_checks():
            self.stderr.write(
                f"{message}\n\tHINT: {message.hint}" if message.hint else str(message)
            )

    def check_port_free(self, host: str, port: int) -> None:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn does
            try:
                probe.bind((host.strip("[]"), port))
            except OSError:
                raise CommandError(
                    f"port {port} on {host} is in use (another hub?); set PORT=... or --port"
                ) from None

    def demo_credentials(self) -> dict[str, str]:
        """A demo project key and operator, made once and kept in the data folder."""
        path = Path(settings.DATA_DIR) / "demo-credentials.json"
        saved: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
        project, _ = project_get_or_create(name=DEMO_PROJECT)
        if not saved.get("api_key") or api_key_authenticate(raw_key=saved["api_key"]) is None:
            _, saved["api_key"] = api_key_create(project=project, name="demo")
        User = get_user_model()
        if not saved.get("password") or not User.objects.filter(username=DEMO_OPERATOR).exists():
            saved["username"] = DEMO_OPERATOR
            saved["password"] = os.urandom(9).hex()
            call_command(
                "create_operator",
                DEMO_OPERATOR,
                password=saved["password"],
                stdout=io.StringIO(),
            )
        path.write_text(json.dumps(saved, indent=2))
        path.chmod(0o600)
        return saved

    def children(
        self, env: dict[str, str], options: dict[str, Any], folder: Path
    ) -> list[ChildProcess]:
        """The web server, the worker pools and beat; the workers and beat need the
        database and Redis to start (beat exits when the database goes away)."""
        # glibc gives each thread that allocates its own malloc arena (up to 8 per core),
        # and a web process has 16 threads: two arenas held the web's peak RSS 390 -> 318
        # MiB in a quick bench (BENCHMARKS.md). The Dockerfile sets the same.
        env = {"MALLOC_ARENA_MAX": "2", **env}
        celery = [sys.executable, "-m", "celery", "-A", "memoryhub"]
        commands = {
            "web": [sys.executable, "-m", "gunicorn", "memoryhub.wsgi", *web_options(options)],
            **{pool.name: pool.command(celery) for pool in pools_of(options)},
            "beat": [*celery, "beat", "--loglevel", "INFO"],
        }
        return [
            ChildProcess(
                name,
                command,
                env=env,
                cwd=Path(settings.BASE_DIR),
                log_path=folder / "logs" / f"{name}.log",
                needs=() if name == "web" else ("database", "redis"),
                echo=sys.stdout.buffer,
            )
            for name, command in commands.items()
        ]

    def wait_for_web(self, base: str, web: ChildProcess, stop: threading.Event) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not stop.is_set():
            if web.ended() is not None:
                raise CommandError(
                    f"the web server {web.ended()}; see {web.log_path} (is the port taken?)"
                )
            try:
                with urllib.request.urlopen(f"{base}/health/", timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        if not stop.is_set():
            raise CommandError(f"the web server did not answer on {base} within 60 s")

    def print_banner(
        self, base: str, credentials: dict[str, str] | None, embedded_redis: bool
    ) -> None:
        database = "embedded PostgreSQL" if settings.EMBEDDED_DATABASE else "DATABASE_URL"
        redis = "embedded Redis" if embedded_redis else "REDIS_URL"
        lines = [
            "",
            f"MemoryHub is running ({database}, {redis}, data in {settings.DATA_DIR})",
            f"  Dashboard  {base}/dashboard/",
            f"  Admin      {base}/admin/",
            f"  API docs   {base}/api/docs/",
            f"  Readiness  {base}/ready/",
        ]
        if credentials:
            lines += [
                f"  Demo project API key   {credentials['api_key']}",
                f"  Operator login         {credentials['username']} / {credentials['password']}",
                "",
                "  Try it:",
                f"    curl -s -H 'Authorization: Bearer {credentials['api_key']}' \\",
                "      -H 'Content-Type: application/json' \\",
                """      -d '{"user": "alice", "content": "I love hiking"}' \\""",
                f"      {base}/api/v1/memories/",
            ]
        lines += ["", "Press Ctrl-C to stop.", ""]
        with OUTPUT_LOCK:
            self.stdout.write("\n".join(lines))
            self.stdout.flush()


def web_options(options: dict[str, Any]) -> list[str]:
    """gunicorn's command line after the application."""
    return [
        *("--bind", f"{options['host']}:{options['port']}"),
        *("--workers", str(options["web_workers"]), "--threads", str(options["web_threads"])),
        *("--timeout", "60", "--graceful-timeout", "10"),
        # room for a query string over the API's own limit (4 KB), so that it gets the
        # API's JSON 413 rather than gunicorn's plain 400
        *("--limit-request-line", "8190"),
        *("--access-logfile", "-" if os.environ.get("ACCESS_LOG") else "/dev/null"),
    ]


def pools_of(options: dict[str, Any]) -> list[WorkerPool]:
    """The worker pools the options ask for (hub_services.worker_pools)."""
    single = options["worker_concurrency"] if options["worker_pools"] == "single" else None
    return worker_pools(
        embed=options["embed_concurrency"], derived=options["derived_concurrency"], single=single
    )
