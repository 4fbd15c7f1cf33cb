"""HNSW recall@k: the hub's vector search beside an exact search over the same rows.

The hub's vector search goes through the per-space HNSW index (approximate) unless the
filtered set has at most RETRIEVAL_EXACT_SCAN_MAX_ROWS rows, when it scans exactly. The
hub judges that size by a capped count and past the cap by the planner's estimate; here
the true count says which path a search took, so a set near the threshold may be
classed differently. The exact top k here uses the untyped ``<=>`` operator, which
cannot use the (cast) index, so PostgreSQL compares the query with every row of the
filtered set.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import psycopg

from bench.client import Api, encode, summary

# memoryhub/settings.py: RETRIEVAL["EXACT_SCAN_MAX_ROWS"]
EXACT_SCAN_MAX_ROWS = int(os.environ.get("RETRIEVAL_EXACT_SCAN_MAX_ROWS", 5_000))

EXACT_SQL = """
    SELECT e.memory_id FROM memories_embedding e JOIN memories_memory m ON m.id = e.memory_id
    WHERE e.space_id = %s AND m.project_id = %s AND m.status = 'active' {user}
    ORDER BY e.vector <=> %s::vector LIMIT %s
"""
COUNT_SQL = """
    SELECT count(*) FROM memories_memory m
    WHERE m.project_id = %s AND m.status = 'active' {user}
"""


def hnsw_recall(
    *, api: Api, db: psycopg.Connection, project: str, vectors: np.ndarray, users: list[str],
    k: int,
) -> list[dict[str, Any]]:  # fmt: skip
    """Recall@k of the hub's vector search against exact search, without and with a
    user filter (``users[i]`` for query ``i``), one dict per filter."""
    project_id = db.execute(
        "SELECT id FROM memories_project WHERE name = %s", [project]
    ).fetchone()[0]
    space_id = db.execute("SELECT id FROM memories_embeddingspace").fetchone()[0]  # the only one
    user_ids = dict(
        db.execute(
            "SELECT external_id, id FROM memories_enduser WHERE project_id = %s", [project_id]
        ).fetchall()
    )
    results = []
    for filtered in (False, True):
        recalls, api_ms, exact_ms, rows = [], [], [], []
        indexed = []  # recall of the searches the hub answered through the index
        for number, vector in enumerate(vectors):
            literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"
            payload: dict[str, Any] = {"embedding": vector.tolist(), "mode": "vector", "k": k}
            user_sql, user_params = "", []
            if filtered:
                if users[number] not in user_ids:  # only in runs too short to reach every user
                    continue
                payload["user"] = users[number]
                user_sql, user_params = "AND m.end_user_id = %s", [user_ids[users[number]]]
            data, elapsed = api.post("/api/v1/search/", encode(payload), expect=200)
            returned = {hit["memory"]["id"] for hit in data["results"]}
            started = time.perf_counter()
            exact = [
                str(row[0])
                for row in db.execute(
                    EXACT_SQL.format(user=user_sql),
                    [space_id, project_id, *user_params, literal, k],
                )
            ]
            exact_ms.append((time.perf_counter() - started) * 1000)
            if not exact:
                continue
            count = db.execute(
                COUNT_SQL.format(user=user_sql), [project_id, *user_params]
            ).fetchone()[0]
            recall = len(returned & set(exact)) / len(exact)
            recalls.append(recall)
            api_ms.append(elapsed)
            rows.append(count)
            if count > EXACT_SCAN_MAX_ROWS:
                indexed.append(recall)
        results.append(
            {
                "filter": "user" if filtered else "none",
                "k": k,
                "n": len(recalls),
                "filtered_rows_min": min(rows, default=None),
                "filtered_rows_max": max(rows, default=None),
                "exact_scan_max_rows": EXACT_SCAN_MAX_ROWS,
                "searches_through_index": len(indexed),
                "recall_mean": _mean(recalls),
                "recall_min": round(min(recalls), 3) if recalls else None,
                "recall_index_mean": _mean(indexed),
                "searches_below_1": sum(1 for value in recalls if value < 1),
                "api_ms": summary(api_ms),
                "exact_query_ms": summary(exact_ms),
            }
        )
    return results


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None
