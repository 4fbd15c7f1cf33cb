"""Bulk-loaded memories: the search levels past what the worker can embed in a run.

The worker embeds ~100 messages/s, so 1M memories through the API would take ~3 hours.
Above the real ingestion, memories are written straight into the hub's PostgreSQL with
COPY. Each one joins two real memories (random pairs, fixed seed): its content is their
two contents, its vector the normalized sum of their real vectors. The model mean-pools
its tokens, so that sum approximates the embedding of the joined text;
``approximation()`` measures how closely on a sample.

Rows look like the hub's own: kind ``message``, embedded, spread over the bench's end
users, 25 consecutive rows per room, ``created_at`` increasing (an older history, before
the earliest memory), metadata ``{"source": "bulk"}``. The per-space HNSW index and the
keyword GIN index (and the indexes of memories_embedding_bits, which triggers fill with
each vector's owner and bits) are dropped before loading and rebuilt after, as one
would for a bulk import: building the HNSW graph once is much faster than inserting a
million rows into it (the GIN index gains little either way). VACUUM and ANALYZE
follow, so autovacuum does not run in the middle of the next measurements.
"""

from __future__ import annotations

import hashlib
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any

import numpy as np
import psycopg
from tqdm import tqdm

from bench.corpus import TURNS_PER_ROOM

CHUNK = 50_000  # rows per COPY
SECONDS_APART = 1  # created_at step between consecutive bulk rows
# session settings of the index builds: the whole HNSW graph of 1M 384-d vectors fits
# in memory (~2 GB), and the leader plus one worker keep both cores busy
MAINTENANCE = {"maintenance_work_mem": "4GB", "max_parallel_maintenance_workers": "1"}
KEYWORD_INDEX = "memory_keyword_gin"
# memories migration 0011: the table of each window's owner and bits, filled by triggers
# on memories_embedding, and its two indexes
BITS_TABLE = "memories_embedding_bits"
BITS_INDEXES = ["embedding_owner_bits", "embedding_bits_window"]
COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
PG_EPOCH = np.datetime64("2000-01-01T00:00:00", "us")
MEMORY_COLUMNS = (
    "id, public_id, end_user_id, room_id, role, content, content_hash, created_at, updated_at, "
    "embedded_at, project_id, kind, content_json, metadata, is_unique, importance, "
    "confidence, access_count, status, embedding_status, source_ids"
)


@dataclass
class Sources:
    """The real (worker-embedded) memories that bulk rows are made of."""

    contents: list[str]
    escaped: list[str]  # for COPY's text format
    roles: list[str]
    vectors: np.ndarray  # float32, one normalized row per memory


def _copy_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _normalized(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class BulkLoader:
    """Loads synthetic memories into the project's space; one per benchmark run."""

    def __init__(self, *, conninfo: str, project: str, seed: int = 23) -> None:
        from pgvector.psycopg import register_vector

        self.conninfo = conninfo
        self.db = psycopg.connect(conninfo, autocommit=True)
        # e.g. pgvector's "hnsw graph no longer fits into maintenance_work_mem" (a slow build)
        self.db.add_notice_handler(lambda notice: print(f"  PostgreSQL: {notice.message_primary}"))
        register_vector(self.db)
        self.rng = np.random.default_rng(seed)
        self.project_id = self._one("SELECT id FROM memories_project WHERE name = %s", project)
        # the hub's one space (the bench configures a single model)
        self.space_id = self._one("SELECT id FROM memories_embeddingspace")
        self.users = [
            row[0]
            for row in self.db.execute(
                "SELECT id FROM memories_enduser WHERE project_id = %s ORDER BY external_id",
                [self.project_id],
            )
        ]
        self.loads = 0
        self._sources: Sources | None = None

    def _one(self, query: str, *params: Any) -> Any:
        row = self.db.execute(query, params).fetchone()
        assert row is not None
        return row[0]

    def close(self) -> None:
        self.db.close()

    @property
    def sources(self) -> Sources:
        """Every real embedded memory of the project (read once: bulk rows are never sources)."""
        if self._sources is None:
            rows = self.db.execute(
                """
                SELECT m.content, m.role, e.vector FROM memories_memory m
                JOIN memories_embedding e ON e.memory_id = m.id AND e.space_id = %s
                WHERE m.project_id = %s AND m.status = 'active'
                  AND NOT m.metadata @> '{"source": "bulk"}' ORDER BY m.created_at, m.id
                """,
                [self.space_id, self.project_id],
                binary=True,
            ).fetchall()
            if len(rows) < 2:
                raise RuntimeError("bulk load: fewer than two embedded memories to pair")
            contents = [row[0] for row in rows]
            self._sources = Sources(
                contents=contents,
                escaped=[_copy_escape(text) for text in contents],
                roles=[row[1] for row in rows],
                vectors=_normalized(np.stack([row[2].to_numpy() for row in rows])),
            )
        return self._sources

    def pairs(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` random pairs (i, j), i != j, of source indexes."""
        n = len(self.sources.contents)
        first = rng.integers(0, n, count)
        second = (first + rng.integers(1, n, count)) % n
        return np.stack([first, second], axis=1)

    def approximation(
        self, embed: Callable[[list[str]], np.ndarray], sample: int = 200
    ) -> dict[str, Any]:
        """How close normalize(e_i + e_j) is to the model's embedding of the joined text."""
        sources = self.sources
        pairs = self.pairs(sample, np.random.default_rng(5))
        texts = [f"{sources.contents[i]} {sources.contents[j]}" for i, j in pairs]
        started = time.perf_counter()
        real = _normalized(np.asarray(embed(texts), dtype=np.float32))
        seconds = time.perf_counter() - started
        summed = _normalized(sources.vectors[pairs[:, 0]] + sources.vectors[pairs[:, 1]])
        cosine = np.sum(real * summed, axis=1)
        # for scale: the better of the two parts alone
        part = np.maximum(
            np.sum(real * sources.vectors[pairs[:, 0]], axis=1),
            np.sum(real * sources.vectors[pairs[:, 1]], axis=1),
        )
        return {
            "pairs": sample,
            "sources": len(sources.contents),
            "cosine_mean": round(float(cosine.mean()), 4),
            "cosine_min": round(float(cosine.min()), 4),
            "cosine_p05": round(float(np.percentile(cosine, 5)), 4),
            "best_part_cosine_mean": round(float(part.mean()), 4),
            "embed_seconds": round(seconds, 2),
        }

    def load(self, count: int) -> dict[str, Any]:
        """Add ``count`` memories; drops and rebuilds the indexes; returns the timings."""
        self.loads += 1
        timings: dict[str, Any] = {"rows": count, "sources": len(self.sources.contents)}
        started = time.perf_counter()
        rooms = self._rooms(-(-count // TURNS_PER_ROOM))
        definitions = self._indexes_drop()
        first = self._one(
            "SELECT min(created_at) FROM memories_memory WHERE project_id = %s", self.project_id
        )
        # the bulk rows come before the real ones, SECONDS_APART apart
        earliest = first.astimezone(UTC).replace(tzinfo=None)
        base = np.datetime64(earliest - timedelta(seconds=count * SECONDS_APART), "us")
        with tqdm(total=count, unit="rows", desc="  bulk COPY", mininterval=5, delay=5) as bar:
            for start in range(0, count, CHUNK):
                size = min(CHUNK, count - start)
                self._copy_chunk(start, size, rooms, base)
                bar.update(size)
        timings["copy_seconds"] = round(time.perf_counter() - started, 2)
        timings["copy_rows_per_second"] = round(count / timings["copy_seconds"])

        # now rather than by autovacuum in the middle of the search measurements
        started = time.perf_counter()
        # the bits table's visibility map too: the compact scan reads it index-only
        self.db.execute(f"VACUUM memories_memory, memories_embedding, memories_room, {BITS_TABLE}")
        timings["vacuum_seconds"] = round(time.perf_counter() - started, 2)
        timings["maintenance"] = dict(MAINTENANCE)
        timings["index_seconds"] = self._indexes_build(definitions)
        started = time.perf_counter()
        self.db.execute(f"ANALYZE memories_memory, memories_embedding, memories_room, {BITS_TABLE}")
        timings["analyze_seconds"] = round(time.perf_counter() - started, 2)
        return timings

    def _indexes_drop(self) -> dict[str, str]:
        """Drop the space's HNSW index, the keyword index and the owner bits index;
        their definitions, to rebuild."""
        names = [f"embedding_hnsw_space_{int(self.space_id)}", KEYWORD_INDEX, *BITS_INDEXES]
        definitions: dict[str, str] = dict(
            self.db.execute(
                "SELECT indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = current_schema() AND indexname = ANY(%s)",
                [names],
            ).fetchall()
        )
        if set(definitions) != set(names):
            raise RuntimeError(f"bulk load: expected indexes {names}, found {list(definitions)}")
        for name in definitions:
            self.db.execute(f"DROP INDEX {name}")
        return definitions

    def _indexes_build(self, definitions: dict[str, str]) -> dict[str, float]:
        """Create the indexes as they were; seconds per index."""
        seconds = {}
        for name, value in MAINTENANCE.items():
            self.db.execute(f"SET {name} = '{value}'")
        for name, definition in definitions.items():
            started = time.perf_counter()
            with self._build_progress(name):
                self.db.execute(definition)
            seconds[name] = round(time.perf_counter() - started, 2)
        for name in MAINTENANCE:
            self.db.execute(f"RESET {name}")
        return seconds

    def _rooms(self, count: int) -> list[int]:
        """Make ``count`` new rooms; their ids in order."""
        rows = self.db.execute(
            """
            INSERT INTO memories_room
                (project_id, external_id, name, world_id, metadata, settings, created_at,
                 updated_at)
            SELECT %s, %s || lpad(g::text, 6, '0'), '', '', '{}', '{}', now(), now()
            FROM generate_series(0, %s - 1) g
            RETURNING external_id, id
            """,
            [self.project_id, f"bulk-{self.loads}-", count],
        ).fetchall()
        ids: dict[str, Any] = dict(rows)
        return [ids[f"bulk-{self.loads}-{number:06d}"] for number in range(count)]

    def _copy_chunk(self, start: int, size: int, rooms: list[int], base: np.datetime64) -> None:
        sources = self.sources
        pairs = self.pairs(size, self.rng)
        vectors = _normalized(sources.vectors[pairs[:, 0]] + sources.vectors[pairs[:, 1]])
        raw = self.rng.integers(0, 256, (size, 16), dtype=np.uint8)
        raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40  # a version 4 UUID, as the hub makes
        raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
        hexes = raw.tobytes().hex()
        positions = np.arange(start, start + size)
        stamps = base + positions * np.timedelta64(SECONDS_APART, "s")
        texts = np.datetime_as_string(stamps, unit="us", timezone="UTC")
        runs = positions // TURNS_PER_ROOM
        users = [self.users[run % len(self.users)] for run in runs.tolist()]
        constant = (
            f'{self.project_id}\tmessage\t{{}}\t{{"source": "bulk"}}\tf\t0.5\t1.0\t0\t'
            "active\tdone\t[]\n"
        )
        lines = []
        for row, (i, j) in enumerate(pairs.tolist()):
            content = f"{sources.contents[i]} {sources.contents[j]}"
            digest = hashlib.sha256(content.encode()).hexdigest()  # memories.models.content_hash
            stamp = texts[row]
            lines.append(
                f"{hexes[32 * row : 32 * row + 32]}\t{hexes[32 * row : 32 * row + 32]}\t"
                f"{users[row]}\t{rooms[runs[row]]}\t"
                f"{sources.roles[i]}\t{sources.escaped[i]} {sources.escaped[j]}\t{digest}\t"
                f"{stamp}\t{stamp}\t{stamp}\t{constant}"
            )
        with self.db.cursor() as cursor:
            with cursor.copy(f"COPY memories_memory ({MEMORY_COLUMNS}) FROM STDIN") as copy:
                copy.write("".join(lines))
            with cursor.copy(
                "COPY memories_embedding (memory_id, space_id, vector, created_at) "
                "FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.write(self._embedding_rows(raw, vectors, stamps))

    def _embedding_rows(self, ids: np.ndarray, vectors: np.ndarray, stamps: np.ndarray) -> bytes:
        """memories_embedding rows in COPY's binary format, built as one numpy array."""
        dimension = vectors.shape[1]
        layout = np.dtype(
            [
                ("fields", ">i2"),
                ("id_size", ">i4"), ("id", "V16"),
                ("space_size", ">i4"), ("space", ">i8"),
                ("vector_size", ">i4"), ("dimension", ">u2"), ("unused", ">u2"),
                ("vector", ">f4", (dimension,)),
                ("created_size", ">i4"), ("created", ">i8"),
            ]
        )  # fmt: skip
        rows = np.zeros(len(ids), dtype=layout)
        rows["fields"] = 4
        rows["id_size"], rows["id"] = 16, ids.view("V16")[:, 0]
        rows["space_size"], rows["space"] = 8, self.space_id
        rows["vector_size"], rows["dimension"] = 4 + 4 * dimension, dimension
        rows["vector"] = vectors
        rows["created_size"] = 8
        rows["created"] = (stamps - PG_EPOCH).astype(np.int64)
        return COPY_SIGNATURE + rows.tobytes() + struct.pack(">h", -1)

    @contextmanager
    def _build_progress(self, index: str) -> Iterator[None]:
        """A progress bar of an index build, read from pg_stat_progress_create_index."""
        pid = self.db.info.backend_pid
        stop = threading.Event()

        def watch() -> None:
            with (
                psycopg.connect(self.conninfo, autocommit=True) as watcher,
                tqdm(desc=f"  {index}", unit="rows", mininterval=5, delay=5) as bar,
            ):
                while not stop.wait(2):
                    row = watcher.execute(
                        "SELECT phase, tuples_done, tuples_total "
                        "FROM pg_stat_progress_create_index WHERE pid = %s",
                        [pid],
                    ).fetchone()
                    if row:
                        phase, done, total = row
                        bar.set_postfix_str(phase, refresh=False)
                        bar.total = total or None
                        bar.update(max(0, (done or 0) - bar.n))

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(5)
