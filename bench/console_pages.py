"""The console pages the console phase times (bench/console_phase.py): every page an
operator opens, for the user of 10,000 memories and for the project, and a project
grown to a level (1M) for the project-wide pages.

Each page is a ``Page``: its name, the path of each request (a search or a context
preview asks a new question each time), whether HTMX asks for it (a fragment) and a
text the answer must hold (a 200 without it is a wrong page, an error in words). The
pages are fetched in rounds, each page once a round, so a drift in the machine's load
touches every page alike; the first round is warm-up (its first time is kept as
``first_ms``: the cold one).

A level is reached with the bench's own bulk loader (bench/bulk.py: memories with their
vectors and the HNSW index rebuilt) when the disk has room for it, else with
``rows_fill``: the memories alone (copies of the project's real messages over its
users, 25 turns a room, older than the rest; no vectors), which is what the project
pages read; BENCH_CONSOLE_FILL=bulk or rows in the environment chooses; the results
say which (``fill``).
"""

from __future__ import annotations

import html
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

from bench.client import summary

TABLE_PAGE_LINK = re.compile(r'<a href="([^"]+)"[^>]*rel="next"')
LAST_PAGE = 1_000_000  # past the last page of any list: its last page
ACTIVITY_OLDER = re.compile(r'<a class="page" href="([^"]+)"[^>]*>Older changes</a>')
# a full 1M bench database is ~5.7 GB (BENCHMARKS.md); the loader needs that and more
BULK_DISK_BYTES_PER_MEMORY = 8_000
FILL_CHUNK = 100_000
# the memories' indexes that back no constraint: dropped for the fill and built once
# after it (much faster than a million insertions into each)
SECONDARY_INDEXES_SQL = """
    SELECT i.indexname, i.indexdef FROM pg_indexes i
    WHERE i.schemaname = current_schema() AND i.tablename = 'memories_memory'
      AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)
"""


class Browser(Protocol):
    def request(
        self, method: str, path: str, body: str | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, str, float]: ...


@dataclass(frozen=True)
class Page:
    name: str
    paths: Callable[[], str]  # the next request's path
    check: str  # a text the answer holds
    htmx: bool = False


def fixed(path: str) -> Callable[[], str]:
    return lambda: path


def tab(label: str) -> str:
    """The check of a full page: its tab marked current in the tab bar."""
    return f'aria-current="page">{label}</a>'


def user_pages(base: str, room_id: int, questions: Iterator[str]) -> list[Page]:
    """The user's tabs (``base`` her page's path), a room view, the memory list's last
    page (a page number past it gives the last: the deepest OFFSET), the live search in
    each mode and a context preview."""
    room = f"{base}rooms/{room_id}/view/"

    def search(mode: str) -> Page:
        def path() -> str:
            return f"{base}search/?{urlencode({'q': next(questions), 'mode': mode})}"

        return Page(f"user search, {mode}", path, f"in {mode} mode", htmx=True)

    def preview() -> str:
        return f"{base}context/?{urlencode({'query': next(questions)})}"

    return [
        Page("user overview", fixed(base), tab("Overview")),
        Page("user memories", fixed(f"{base}memories/"), tab("Memories")),
        Page(
            "user memories, last page",
            fixed(f"{base}memories/?page={LAST_PAGE}"),
            "newest first; page",
            htmx=True,
        ),
        Page("user facts", fixed(f"{base}facts/"), tab("Facts")),
        Page("user rooms", fixed(f"{base}rooms/"), tab("Rooms")),
        Page("user room view", fixed(room), tab("Rooms")),
        Page("user context", fixed(f"{base}context/"), tab("Context")),
        Page("user context preview", preview, "total-tokens"),
        Page("user synopsis", fixed(f"{base}synopsis/"), tab("Synopsis")),
        Page("user documents", fixed(f"{base}documents/"), tab("Documents")),
        *(search(mode) for mode in ("auto", "vector", "keyword", "hybrid")),
    ]


def project_pages(project_id: int, word: str) -> list[Page]:
    """Every project page of the tab bar, the polled fragments, the memory table
    filtered (a kind, a word); the second keyset pages are ``next_pages``'."""
    p = f"/dashboard/p/{project_id}/"
    return [
        Page("dashboard", fixed("/dashboard/"), "bench"),
        Page("overview", fixed(p), tab("Overview")),
        Page("overview, health poll", fixed(f"{p}?part=health"), "Workers and queues", htmx=True),
        Page("users", fixed(f"{p}users/"), tab("Users")),
        Page("memories", fixed(f"{p}memories/"), tab("Memories")),
        Page("memories, kind=fact", fixed(f"{p}memories/?kind=fact"), tab("Memories")),
        Page("memories, words", fixed(f"{p}memories/?{urlencode({'q': word})}"), tab("Memories")),
        Page("review inbox", fixed(f"{p}review/"), tab("Review")),
        Page("documents", fixed(f"{p}documents/"), tab("Documents")),
        Page("jobs", fixed(f"{p}jobs/"), tab("Jobs")),
        Page("jobs, live poll", fixed(f"{p}jobs/?part=live"), 'id="jobs-live"', htmx=True),
        Page("pruning", fixed(f"{p}pruning/"), tab("Pruning")),
        Page("trash", fixed(f"{p}trash/"), tab("Trash")),
        Page("activity", fixed(f"{p}activity/"), tab("Activity")),
        Page("llm usage", fixed(f"{p}usage/"), tab("LLM usage")),
        Page("api keys", fixed(f"{p}keys/"), tab("API keys")),
        Page("team", fixed(f"{p}team/"), tab("Team")),
        Page("configuration", fixed(f"{p}settings/"), tab("Configuration")),
    ]


def next_pages(browser: Browser, project_id: int) -> list[Page]:
    """The memory table's second keyset page (kind=fact's too) and the activity log's
    older page, by the links their first pages give (none when a list is one page)."""
    p = f"/dashboard/p/{project_id}/"
    found = []
    for name, first, pattern, label in (
        ("memories, page 2", f"{p}memories/", TABLE_PAGE_LINK, "Memories"),
        ("memories, kind=fact, page 2", f"{p}memories/?kind=fact", TABLE_PAGE_LINK, "Memories"),
        ("activity, page 2", f"{p}activity/", ACTIVITY_OLDER, "Activity"),
    ):
        status, text, _ = browser.request("GET", first)
        link = pattern.search(text) if status == 200 else None
        if link is not None:
            found.append(Page(name, fixed(html.unescape(link.group(1))), tab(label)))
    return found


def pages_time(
    browser: Browser, pages: list[Page], rounds: int, warmup: int
) -> dict[str, dict[str, Any]]:
    """Each page ``warmup + rounds`` times, a round at a time; p50/p95 of the measured."""
    times: dict[str, list[float]] = {page.name: [] for page in pages}
    for _ in range(warmup + rounds):
        for page in pages:
            path = page.paths()
            headers = {"HX-Request": "true"} if page.htmx else {}
            status, text, elapsed = browser.request("GET", path, headers=headers)
            if status != 200 or page.check not in text:
                raise RuntimeError(f"console GET {path}: {status}, {page.check!r} missing")
            times[page.name].append(elapsed)
    return {
        name: {**summary(values[warmup:]), "first_ms": round(values[0], 2)}
        for name, values in times.items()
    }


def bulk_fits(db_path: str, memories: int) -> bool:
    """Whether the disk holding the database has room for ``memories`` bulk-loaded ones
    with their vectors and indexes, leaving as much again for everyone else."""
    return shutil.disk_usage(db_path).free > 2 * memories * BULK_DISK_BYTES_PER_MEMORY


FILL_ROOMS_SQL = """
    INSERT INTO memories_room
        (project_id, external_id, name, world_id, metadata, settings, created_at, updated_at)
    SELECT %(project)s, %(prefix)s || lpad(r::text, 6, '0'), '', '', '{}', '{}', now(), now()
    FROM generate_series(%(first_room)s::int, %(last_room)s::int) r
"""
FILL_SOURCES_SQL = """
    CREATE TEMPORARY TABLE console_sources AS
    SELECT content, content_hash, role, row_number() OVER (ORDER BY content_hash) - 1 AS i
    FROM (
        SELECT DISTINCT ON (content_hash) content, content_hash, role
        FROM memories_memory
        WHERE project_id = %(project)s AND kind = 'message' AND status = 'active'
        ORDER BY content_hash
    ) distinct_texts
"""
FILL_SQL = """
    WITH total AS (SELECT count(*) AS n FROM console_sources),
    users AS (
        SELECT id, row_number() OVER (ORDER BY id) - 1 AS i, count(*) OVER () AS n
        FROM memories_enduser WHERE project_id = %(project)s AND external_id LIKE 'user-%%'
    )
    INSERT INTO memories_memory
        (id, public_id, project_id, end_user_id, room_id, kind, role, content, content_hash,
         created_at, updated_at, embedded_at, content_json, metadata, is_unique, importance,
         confidence, access_count, status, embedding_status, source_ids)
    SELECT new.id, new.id, %(project)s, u.id, room.id, 'message', s.role, s.content,
           s.content_hash, stamp.at, stamp.at, stamp.at, '{}', '{"source": "bulk"}', false,
           0.5, 1.0, 0, 'active', 'done', '[]'
    FROM (
        SELECT g, gen_random_uuid() AS id FROM generate_series(%(start)s::int, %(stop)s::int - 1) g
    ) new
    CROSS JOIN total
    JOIN console_sources s ON s.i = new.g %% total.n
    JOIN users u ON u.i = (new.g / 25) %% u.n
    JOIN memories_room room
      ON room.project_id = %(project)s
     AND room.external_id = %(prefix)s || lpad((new.g / 25)::text, 6, '0')
    CROSS JOIN LATERAL (
        SELECT %(earliest)s::timestamptz - (%(count)s - new.g) * interval '1 second' AS at
    ) stamp
"""


def rows_fill(db: Any, project_id: int, count: int, prefix: str) -> dict[str, Any]:
    """Add ``count`` memories (no vectors) to the project, 25 turns a room spread over
    its bench users, a second apart before its earliest memory; the timings."""
    started = time.perf_counter()
    db.execute("SET maintenance_work_mem = '1GB'")
    with db.transaction():  # all or nothing: the indexes are back if a chunk fails
        # Django's foreign keys are deferred: checked now, no index build waits on them
        db.execute("SET CONSTRAINTS ALL IMMEDIATE")
        definitions = dict(db.execute(SECONDARY_INDEXES_SQL).fetchall())
        for name in definitions:
            db.execute(f"DROP INDEX {name}")
        earliest = db.execute(
            "SELECT min(created_at) FROM memories_memory WHERE project_id = %s", (project_id,)
        ).fetchone()[0]
        params: dict[str, Any] = {
            "project": project_id, "prefix": prefix, "count": count, "earliest": earliest,
            "first_room": 0, "last_room": -(-count // 25) - 1,
        }  # fmt: skip
        db.execute(FILL_ROOMS_SQL, params)
        db.execute(FILL_SOURCES_SQL, params)
        db.execute("CREATE UNIQUE INDEX ON console_sources (i)")
        db.execute("ANALYZE console_sources")
        for start in range(0, count, FILL_CHUNK):
            stop = min(count, start + FILL_CHUNK)
            db.execute(FILL_SQL, {**params, "start": start, "stop": stop})
            print(f"    filled {stop:,} of {count:,}", flush=True)
        db.execute("DROP TABLE console_sources")
        inserted = time.perf_counter()
        for definition in definitions.values():
            db.execute(definition)
    indexed = time.perf_counter()
    db.execute("VACUUM ANALYZE memories_memory, memories_room")
    return {
        "fill": "rows",
        "rows": count,
        "insert_seconds": round(inserted - started, 2),
        "index_seconds": round(indexed - inserted, 2),
        "vacuum_analyze_seconds": round(time.perf_counter() - indexed, 2),
    }


def markdown_table(levels: list[dict[str, Any]]) -> str:
    """The pages' p50 / p95 at each measured level, one column pair a level."""
    names: list[str] = []
    for level in levels:
        names += [name for name in level["requests"] if name not in names]
    head = " | ".join(f"{level['label']} p50 ms | p95 ms" for level in levels)
    lines = [f"| page | {head} |", "| --- |" + " ---: | ---: |" * len(levels)]
    for name in names:
        cells = []
        for level in levels:
            row = level["requests"].get(name)
            cells += [f"{row['p50']:.1f}", f"{row['p95']:.1f}"] if row else ["–", "–"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
