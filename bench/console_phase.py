"""The console phase of bench/run.py: how long the operators' console takes to render
the user page and the live search for a user of 10,000 memories (target: p95 under
200 ms each).

A user of CONSOLE_MEMORIES memories is bulk-inserted straight into the hub's PostgreSQL
(as bench/bulk.py loads its levels): copies of the project's real embedded messages,
with their vectors, 9 in 10 as messages in rooms of 25 turns and 1 in 10 as facts,
created a minute apart up to now. An editor of the project is made with `manage.py
create_operator` and logs in through the console's login form; then, over one
persistent HTTP connection, warm-up requests and CONSOLE_N measured ones of:

* ``page``: the user page (header counts, rooms, the newest page of the most recent
  room, the first page of the memory list, the search box);
* ``list_last_page``: the memory list's last page, the HTMX fragment (the deepest OFFSET);
* ``search_<mode>``: the live search fragment for the query stream's questions, in each
  mode (the project's default, auto, first), as the search box asks for it.

Times are the client's, from sending the request to the last byte, on 127.0.0.1 (the
server's render plus a local round trip). It runs last: the user it adds would change
which user the context phase measures. Figures go to ``results["console"]``.
"""

from __future__ import annotations

import http.client
import re
import secrets
import time
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

from bench.client import IDLE_RECONNECT_SECONDS, summary
from bench.phases import PROJECT, Bench

CONSOLE_PHASES = ("console",)
CONSOLE_MEMORIES = 10_000
CONSOLE_N = 30
CONSOLE_WARMUP = 3
TARGET_P95_MS = 200.0
USER = "console-10k"
OPERATOR = "bench-operator"
SEARCH_MODES = ("auto", "vector", "keyword", "hybrid")
TURNS_PER_ROOM = 25

# the user's rows, numbered g = 0..N-1, each a copy of one of the project's real
# embedded messages (cycled); kept with its source's id to copy the vector after
ROWS_SQL = """
    CREATE TEMPORARY TABLE console_rows AS
    WITH sources AS (
        SELECT m.id, m.content, m.content_hash, m.role,
               row_number() OVER (ORDER BY m.created_at, m.id) - 1 AS i
        FROM memories_memory m
        WHERE m.project_id = %(project)s AND m.status = 'active' AND m.kind = 'message'
          AND m.embedding_status = 'done' AND m.end_user_id <> %(user)s
    ), total AS (SELECT count(*) AS n FROM sources)
    SELECT g, gen_random_uuid() AS id, s.id AS source_id, s.content, s.content_hash, s.role
    FROM generate_series(0, %(count)s - 1) g
    CROSS JOIN total JOIN sources s ON s.i = g %% total.n
"""
ROOMS_SQL = """
    INSERT INTO memories_room
        (project_id, external_id, name, world_id, metadata, settings, created_at, updated_at)
    SELECT %(project)s, %(prefix)s || lpad(r::text, 4, '0'), '', '', '{}', '{}', now(), now()
    FROM generate_series(0, %(rooms)s - 1) r
"""
MEMORIES_SQL = """
    INSERT INTO memories_memory
        (id, public_id, project_id, end_user_id, room_id, kind, role, content, content_hash,
         created_at, updated_at, embedded_at, content_json, metadata, is_unique, importance,
         confidence, access_count, status, embedding_status, source_ids)
    SELECT r.id, r.id, %(project)s, %(user)s,
           CASE WHEN r.g %% 10 = 9 THEN NULL ELSE room.id END,
           CASE WHEN r.g %% 10 = 9 THEN 'fact' ELSE 'message' END,
           CASE WHEN r.g %% 10 = 9 THEN '' ELSE r.role END,
           r.content, r.content_hash, stamp.at, stamp.at, stamp.at, '{}', '{"source": "console"}',
           false, 0.5, 1.0, 0, 'active', 'done', '[]'
    FROM console_rows r
    CROSS JOIN LATERAL (
        SELECT now() - (%(count)s - 1 - r.g) * interval '1 minute' AS at
    ) stamp
    LEFT JOIN memories_room room
        ON room.project_id = %(project)s
       AND room.external_id = %(prefix)s || lpad((r.g / %(per_room)s)::text, 4, '0')
"""
EMBEDDINGS_SQL = """
    INSERT INTO memories_embedding (memory_id, space_id, "window", vector, created_at)
    SELECT r.id, e.space_id, e."window", e.vector, now()
    FROM console_rows r JOIN memories_embedding e ON e.memory_id = r.source_id
"""


def console_phases_run(bench: Bench, names: tuple[str, ...] = CONSOLE_PHASES) -> None:
    """A try-out's --only: the console phase at the memories there are."""
    if "console" in names:
        console_phase(bench)


def console_phase(bench: Bench) -> None:
    """Load the user, log an editor in, time the pages; figures in results["console"]."""
    bench.wait_embedded("before the console")
    bench.phase("console_load", f"console: a user of {CONSOLE_MEMORIES:,} memories (bulk insert)")
    project_id, user_id, load = console_user_load(bench)
    password = secrets.token_urlsafe(16)
    bench.hub.manage(
        # one argument: a random password may begin with "-", which argparse would
        # take for an option
        "create_operator", OPERATOR, "--project", PROJECT, "--role", "editor",
        f"--password={password}",
    )  # fmt: skip
    browser = ConsoleClient(bench.hub.port)
    try:
        browser.login(OPERATOR, password)
        base = f"/dashboard/p/{project_id}/users/{user_id}/"
        bench.phase(
            "console",
            f"console: user page, list's last page, live search ({', '.join(SEARCH_MODES)}): "
            f"{CONSOLE_WARMUP} warm-up and {CONSOLE_N} measured requests each",
        )
        pages = -(-CONSOLE_MEMORIES // 50)
        figures = {
            "page": browser.timed([base] * (CONSOLE_WARMUP + CONSOLE_N), check=USER),
            "list_last_page": browser.timed(
                [f"{base}?page={pages}"] * (CONSOLE_WARMUP + CONSOLE_N),
                htmx=True,
                check=f"page {pages} of {pages}",
            ),  # fmt: skip
        }
        for mode in SEARCH_MODES:
            paths = [
                f"{base}search/?{urlencode({'q': next(bench.queries), 'mode': mode})}"
                for _ in range(CONSOLE_WARMUP + CONSOLE_N)
            ]
            figures[f"search_{mode}"] = browser.timed(paths, htmx=True, check=f"in {mode} mode")
    finally:
        browser.close()
    measured = {
        name: {**summary(times[CONSOLE_WARMUP:]), "first_ms": round(times[0], 2)}
        for name, times in figures.items()
    }
    bench.results["console"] = {
        "user_memories": CONSOLE_MEMORIES,
        "project_memories": bench.memories(),
        "load": load,
        "warmup": CONSOLE_WARMUP,
        "target_p95_ms": TARGET_P95_MS,
        "requests": measured,
        "meets_target": all(row["p95"] < TARGET_P95_MS for row in measured.values()),
        "foreign_cpu_cores": bench.foreign("console"),
    }
    for name, row in measured.items():
        print(f"    {name:<16} p50 {row['p50']:7.1f} ms   p95 {row['p95']:7.1f} ms", flush=True)


def console_user_load(bench: Bench) -> tuple[int, int, dict[str, Any]]:
    """The project's id, the new user's id and the load's timings."""
    db = bench.db
    started = time.perf_counter()
    project_id = int(bench.sql("SELECT id FROM memories_project WHERE name = %s", PROJECT))
    user_id = int(
        bench.sql(
            "INSERT INTO memories_enduser (project_id, external_id, name, metadata, created_at,"
            " updated_at) VALUES (%s, %s, 'Console bench user', '{}', now(), now()) RETURNING id",
            project_id, USER,
        )
    )  # fmt: skip
    params = {
        "project": project_id, "user": user_id, "count": CONSOLE_MEMORIES,
        "prefix": f"{USER}-room-", "per_room": TURNS_PER_ROOM,
        "rooms": -(-CONSOLE_MEMORIES // TURNS_PER_ROOM),
    }  # fmt: skip
    with db.transaction():
        db.execute(ROWS_SQL, params)
        db.execute(ROOMS_SQL, params)
        db.execute(MEMORIES_SQL, params)
        inserted = time.perf_counter()
        db.execute(EMBEDDINGS_SQL)  # into the HNSW index one by one: the slow part
        db.execute("DROP TABLE console_rows")
    embedded = time.perf_counter()
    db.execute("ANALYZE memories_memory, memories_embedding, memories_room")
    held = int(bench.sql("SELECT count(*) FROM memories_memory WHERE end_user_id = %s", user_id))
    if held != CONSOLE_MEMORIES:
        raise RuntimeError(f"console: the user holds {held} memories, not {CONSOLE_MEMORIES}")
    return (
        project_id,
        user_id,
        {
            "memories_seconds": round(inserted - started, 2),
            "embeddings_seconds": round(embedded - inserted, 2),
            "analyze_seconds": round(time.perf_counter() - embedded, 2),
        },
    )


class ConsoleClient:
    """A logged-in browser's requests on one persistent connection, with its cookies."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cookies: dict[str, str] = {}
        self.connection: http.client.HTTPConnection | None = None
        self.last_used = 0.0

    def request(
        self, method: str, path: str, body: str | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, str, float]:
        """(status, body text, milliseconds from sending to the last byte)."""
        if self.connection is None or time.monotonic() - self.last_used > IDLE_RECONNECT_SECONDS:
            if self.connection is not None:
                self.connection.close()
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            self.connection.connect()
        sent = {**(headers or {})}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        started = time.perf_counter()
        self.connection.request(method, path, body=body, headers=sent)
        response = self.connection.getresponse()
        raw = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        self.last_used = time.monotonic()
        for header in response.headers.get_all("Set-Cookie") or []:
            cookie: SimpleCookie = SimpleCookie()
            cookie.load(header)
            self.cookies.update({name: morsel.value for name, morsel in cookie.items()})
        return response.status, raw.decode(errors="replace"), elapsed

    def login(self, username: str, password: str) -> None:
        """Through the console's login form, as a person would (CSRF token and cookie)."""
        status, html, _ = self.request("GET", "/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
        if status != 200 or token is None:
            raise RuntimeError(f"console login page: {status}")
        form = urlencode(
            {"username": username, "password": password, "csrfmiddlewaretoken": token.group(1)}
        )
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        status, html, _ = self.request("POST", "/login/", form, headers)
        if status != 302 or "sessionid" not in self.cookies:
            raise RuntimeError(f"console login refused: {status} {html[:300]}")

    def timed(self, paths: list[str], *, htmx: bool = False, check: str) -> list[float]:
        """GET each path (as HTMX asks for a fragment when ``htmx``); the milliseconds of
        each, after checking the answer is a 200 holding ``check``."""
        headers = {"HX-Request": "true"} if htmx else {}
        times = []
        for path in paths:
            status, html, elapsed = self.request("GET", path, headers=headers)
            if status != 200 or check not in html:
                raise RuntimeError(f"console GET {path}: {status}, {check!r} missing")
            times.append(elapsed)
        return times

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
