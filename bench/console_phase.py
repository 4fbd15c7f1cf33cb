"""The console phase of bench/run.py: how long the operators' console takes to render
every page an operator opens, for a user of 10,000 memories and for the project, and
again once the project holds each of the plan's levels (the full run's 1,000,000;
``--levels`` in a try-out). Target: p95 under 200 ms each.

A user of CONSOLE_MEMORIES memories is bulk-inserted straight into the hub's PostgreSQL
(as bench/bulk.py loads its levels): copies of the project's real embedded messages,
with their vectors, 9 in 10 as messages in rooms of 25 turns and 1 in 10 as facts,
created a minute apart up to now. An editor of the project is made with `manage.py
create_operator` and logs in through the console's login form; as an operator would,
she forgets TRASHED of the user's oldest messages with the Memories table's bulk action
(timed: the trash and the activity log then hold them), and PROPOSED of her facts are
set to wait in the review inbox. Then, over one persistent HTTP connection, every page
of bench/console_pages.py (the user's tabs, a room view, the memory list's last page,
the live search in each mode, a context preview; every project page, the polled
fragments, the memory table filtered and its second keyset page, the activity log's
second page), CONSOLE_WARMUP rounds of warm-up and CONSOLE_N measured ones.

Times are the client's, from sending the request to the last byte, on 127.0.0.1 (the
server's render plus a local round trip). It runs last: the user it adds would change
which user the context phase measures. Figures go to ``results["console"]``; the
phase prints them as a Markdown table.
"""

from __future__ import annotations

import http.client
import os
import re
import secrets
import time
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

from bench.client import IDLE_RECONNECT_SECONDS
from bench.console_pages import (
    bulk_fits,
    markdown_table,
    next_pages,
    pages_time,
    project_pages,
    rows_fill,
    user_pages,
)
from bench.phases import PROJECT, Bench

CONSOLE_PHASES = ("console",)
CONSOLE_MEMORIES = 10_000
CONSOLE_N = int(os.environ.get("BENCH_CONSOLE_N", 30))  # measured rounds
CONSOLE_WARMUP = 3
TARGET_P95_MS = 200.0
USER = "console-10k"
OPERATOR = "bench-operator"
TURNS_PER_ROOM = 25
TRASHED = 900  # of her oldest messages, forgotten through the Memories table (ticked ids:
# Django takes at most 1,000 fields a POST)
PROPOSED = 200  # of her facts, waiting in the review inbox
TABLE_WORD = "painting"  # the Memories table's words filter

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
    """A try-out's --only: the console phase at the memories there are, then at each of
    the plan's levels (``--levels``)."""
    if "console" in names:
        console_phase(bench, levels=bench.plan.levels)


def console_phase(bench: Bench, levels: tuple[int, ...] = ()) -> None:
    """Load the user, log an editor in, time every page now and at each of ``levels``
    (memories in the project, added first); figures in results["console"]."""
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
    measured: list[dict[str, Any]] = []
    try:
        browser.login(OPERATOR, password)
        load["trash_action_ms"] = console_trash(bench, browser, project_id, user_id)
        console_propose(bench, user_id)
        measured.append(console_measure(bench, browser, project_id, user_id))
        console_results(bench, load, measured)
        for level in levels:
            fill = console_fill(bench, project_id, level)
            if fill is not None:
                measured.append({**console_measure(bench, browser, project_id, user_id), **fill})
                console_results(bench, load, measured)
    finally:
        browser.close()


def console_results(bench: Bench, load: dict[str, Any], measured: list[dict[str, Any]]) -> None:
    """The figures so far into results["console"] (a later level may fail), and printed."""
    bench.results["console"] = {
        "user_memories": CONSOLE_MEMORIES,
        "project_memories": bench.memories(),
        "load": load,
        "warmup": CONSOLE_WARMUP,
        "rounds": CONSOLE_N,
        "target_p95_ms": TARGET_P95_MS,
        "requests": measured[-1]["requests"],  # at the largest project
        "levels": measured,
        "meets_target": all(
            row["p95"] < TARGET_P95_MS for level in measured for row in level["requests"].values()
        ),
        "foreign_cpu_cores": bench.foreign("console"),
    }
    print(markdown_table(measured), flush=True)


def console_measure(
    bench: Bench, browser: ConsoleClient, project_id: int, user_id: int
) -> dict[str, Any]:
    """Every page, CONSOLE_WARMUP + CONSOLE_N rounds, at the project's memories now."""
    memories = int(
        bench.sql("SELECT count(*) FROM memories_memory WHERE project_id = %s", project_id)
    )
    name = f"console_{memories}"
    room_id = int(
        bench.sql(
            "SELECT room_id FROM memories_memory WHERE end_user_id = %s AND room_id IS NOT NULL"
            " ORDER BY created_at DESC LIMIT 1",
            user_id,
        )
    )
    base = f"/dashboard/p/{project_id}/users/{user_id}/"
    pages = [
        *user_pages(base, room_id, bench.queries),
        *project_pages(project_id, TABLE_WORD),
        *next_pages(browser, project_id),
    ]
    bench.phase(
        name,
        f"console at {memories:,} memories: {len(pages)} pages, "
        f"{CONSOLE_WARMUP} warm-up and {CONSOLE_N} measured rounds",
    )
    started = time.perf_counter()
    requests = pages_time(browser, pages, CONSOLE_N, CONSOLE_WARMUP)
    return {
        "label": f"project of {memories:,}",
        "project_memories": memories,
        "seconds": round(time.perf_counter() - started, 1),
        "requests": requests,
        "foreign_cpu_cores": bench.foreign(name),
    }


def console_fill(bench: Bench, project_id: int, level: int) -> dict[str, Any] | None:
    """Grow the project to ``level`` memories: the bench's bulk load (with vectors) when
    the disk has room, else the rows alone; None if it holds that many already."""
    missing = level - bench.memories()
    if missing <= 0:
        return None
    fill = os.environ.get("BENCH_CONSOLE_FILL") or (
        "bulk" if bulk_fits(str(bench.hub.data_dir), missing) else "rows"
    )
    if fill == "bulk":
        bench.bulk_load(level)
        return {"fill": "bulk", "fill_seconds": bench.results["bulk"][-1]["seconds"]}
    bench.phase(
        f"console_fill_{level}",
        f"console: {missing:,} memories without vectors (the disk has no room for the bulk load's)",
    )
    started = time.perf_counter()
    figures = rows_fill(bench.db, project_id, missing, prefix=f"console-fill-{level}-")
    return {**figures, "fill_seconds": round(time.perf_counter() - started, 1)}


def console_trash(bench: Bench, browser: ConsoleClient, project_id: int, user_id: int) -> float:
    """Forget the user's TRASHED oldest messages with the Memories table's bulk action,
    confirmed, as an operator would; its milliseconds."""
    rows = bench.db.execute(
        "SELECT id FROM memories_memory WHERE end_user_id = %s AND kind = 'message'"
        " ORDER BY created_at LIMIT %s",
        (user_id, TRASHED),
    ).fetchall()
    form = [("action", "forget"), ("confirm", "yes"), *(("ids", str(row[0])) for row in rows)]
    started = time.perf_counter()
    status, text, elapsed = browser.post(f"/dashboard/p/{project_id}/memories/action/", form)
    deadline = time.monotonic() + 300  # a large action runs in the background: wait for it
    while status == 200 and time.monotonic() < deadline and _trashed(bench, user_id) < TRASHED:
        time.sleep(0.5)
    elapsed = (time.perf_counter() - started) * 1000
    trashed = int(
        bench.sql(
            "SELECT count(*) FROM memories_memory WHERE end_user_id = %s AND status = 'trashed'",
            user_id,
        )
    )
    if status != 200 or trashed != TRASHED:
        raise RuntimeError(
            f"console: the bulk forget answered {status}, {trashed} trashed: {text[:300]}"
        )
    return round(elapsed, 1)


def _trashed(bench: Bench, user_id: int) -> int:
    return int(
        bench.sql(
            "SELECT count(*) FROM memories_memory WHERE end_user_id = %s AND status = 'trashed'",
            user_id,
        )
    )


def console_propose(bench: Bench, user_id: int) -> None:
    """PROPOSED of the user's facts wait in the review inbox (as extractions would with
    facts.review on)."""
    bench.db.execute(
        "UPDATE memories_memory SET status = 'proposed' WHERE id IN (SELECT id"
        " FROM memories_memory WHERE end_user_id = %s AND kind = 'fact' AND status = 'active'"
        " ORDER BY created_at DESC LIMIT %s)",
        (user_id, PROPOSED),
    )


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

    def post(self, path: str, form: list[tuple[str, str]]) -> tuple[int, str, float]:
        """A form POST with the CSRF cookie's token, as HTMX sends it."""
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-CSRFToken": self.cookies.get("csrftoken", ""),
            "HX-Request": "true",
        }
        return self.request("POST", path, urlencode(form), headers)

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

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
