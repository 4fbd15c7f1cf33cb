"""HNSW recall@k: the hub's vector search beside an exact search over the same rows.

The hub's vector search goes through the per-space HNSW index (approximate) unless the
filtered set has at most RETRIEVAL_EXACT_SCAN_MAX_ROWS rows, when it scans exactly, or is
one user's of RETRIEVAL_COMPACT_SCAN_MIN_ROWS to _MAX_ROWS, when it scans the user's
binary-quantized vectors and re-ranks a shortlist (memories/services/search/compact.py). The
hub judges that size by a capped count and past the cap by the planner's estimate; here
the true count says which path a search took, so a set near the threshold may be
classed differently. The exact top k here uses the untyped ``<=>`` operator, which
cannot use the (cast) index, so PostgreSQL compares the query with every row of the
filtered set.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg

from bench.client import Api, encode, summary

# memoryhub/settings.py: RETRIEVAL["EXACT_SCAN_MAX_ROWS"], ["COMPACT_SCAN_MAX_ROWS"]
EXACT_SCAN_MAX_ROWS = int(os.environ.get("RETRIEVAL_EXACT_SCAN_MAX_ROWS", 5_000))
# one user's set between these goes through the compact scan (bits, then floats)
COMPACT_SCAN_MIN_ROWS = int(os.environ.get("RETRIEVAL_COMPACT_SCAN_MIN_ROWS", 1_000))
COMPACT_SCAN_MAX_ROWS = int(os.environ.get("RETRIEVAL_COMPACT_SCAN_MAX_ROWS", 200_000))

EXACT_SQL = """
    SELECT e.memory_id FROM memories_embedding e JOIN memories_memory m ON m.id = e.memory_id
    WHERE e.space_id = %s AND m.project_id = %s AND m.status = 'active' {user}
    ORDER BY e.vector <=> %s::vector LIMIT %s
"""
COUNT_SQL = """
    SELECT count(*) FROM memories_memory m
    WHERE m.project_id = %s AND m.status = 'active' {user}
"""


def _ids(db: psycopg.Connection[Any], project: str) -> tuple[Any, Any, dict[str, Any]]:
    """The project's id, the embedding space's and its users' by external id."""
    project_row = db.execute("SELECT id FROM memories_project WHERE name = %s", [project])
    project_id = _one(project_row.fetchone())
    space_id = _one(db.execute("SELECT id FROM memories_embeddingspace").fetchone())  # the only one
    user_ids: dict[str, Any] = dict(
        db.execute(
            "SELECT external_id, id FROM memories_enduser WHERE project_id = %s", [project_id]
        ).fetchall()
    )
    return project_id, space_id, user_ids


def _one(row: tuple[Any, ...] | None) -> Any:
    assert row is not None
    return row[0]


@dataclass
class _Samples:
    recalls: list[float] = field(default_factory=list)
    api_ms: list[float] = field(default_factory=list)
    exact_ms: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    # recall of the searches the hub answered through the index, and by the compact scan
    indexed: list[float] = field(default_factory=list)
    compact: list[float] = field(default_factory=list)


def _compare(
    *, api: Api, db: psycopg.Connection[Any], ids: tuple[Any, Any, dict[str, Any]],
    vector: np.ndarray, user: str | None, k: int, samples: _Samples,
) -> None:  # fmt: skip
    """One query: the hub's vector search and the exact scan, recall of the first."""
    project_id, space_id, user_ids = ids
    literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"
    payload: dict[str, Any] = {"embedding": vector.tolist(), "mode": "vector", "k": k}
    user_sql, user_params = "", []
    if user is not None:
        payload["user"] = user
        user_sql, user_params = "AND m.end_user_id = %s", [user_ids[user]]
    data, elapsed = api.post("/api/v1/search/", encode(payload), expect=200)
    returned = {hit["memory"]["id"] for hit in data["results"]}
    started = time.perf_counter()
    exact = [
        str(row[0])
        for row in db.execute(
            EXACT_SQL.format(user=user_sql), [space_id, project_id, *user_params, literal, k]
        )
    ]
    samples.exact_ms.append((time.perf_counter() - started) * 1000)
    if not exact:
        return
    count = _one(db.execute(COUNT_SQL.format(user=user_sql), [project_id, *user_params]).fetchone())
    recall = len(returned & set(exact)) / len(exact)
    samples.recalls.append(recall)
    samples.api_ms.append(elapsed)
    samples.rows.append(count)
    if user is not None and COMPACT_SCAN_MIN_ROWS < count <= COMPACT_SCAN_MAX_ROWS:
        samples.compact.append(recall)
    elif count > EXACT_SCAN_MAX_ROWS:
        samples.indexed.append(recall)


def _figures(filtered: bool, k: int, samples: _Samples) -> dict[str, Any]:
    recalls = samples.recalls
    return {
        "filter": "user" if filtered else "none",
        "k": k,
        "n": len(recalls),
        "filtered_rows_min": min(samples.rows, default=None),
        "filtered_rows_max": max(samples.rows, default=None),
        "exact_scan_max_rows": EXACT_SCAN_MAX_ROWS,
        "searches_through_index": len(samples.indexed),
        "recall_mean": _mean(recalls),
        "recall_min": round(min(recalls), 3) if recalls else None,
        "recall_index_mean": _mean(samples.indexed),
        "searches_compact": len(samples.compact),
        "recall_compact_mean": _mean(samples.compact),
        "searches_below_1": sum(1 for value in recalls if value < 1),
        "api_ms": summary(samples.api_ms),
        "exact_query_ms": summary(samples.exact_ms),
    }


def hnsw_recall(
    *, api: Api, db: psycopg.Connection[Any], project: str, vectors: np.ndarray,
    users: list[str], k: int,
) -> list[dict[str, Any]]:  # fmt: skip
    """Recall@k of the hub's vector search against exact search, without and with a
    user filter (``users[i]`` for query ``i``), one dict per filter."""
    ids = _ids(db, project)
    results = []
    for filtered in (False, True):
        samples = _Samples()
        for number, vector in enumerate(vectors):
            user = users[number] if filtered else None
            if (
                user is not None and user not in ids[2]
            ):  # only in runs too short to reach every user
                continue
            _compare(api=api, db=db, ids=ids, vector=vector, user=user, k=k, samples=samples)
        results.append(_figures(filtered, k, samples))
    return results


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None
