"""What every vector scan shares: the request it answers (VectorRequest), the signal it
returns (VectorSignal), and the pieces of SQL and parameters its statement is written
with. The scans (exact.py, compact.py, hnsw.py) build on this module, and vector.py,
which chooses between them, on the scans.

A memory's distance comes from its windows' (a long text is embedded as several
windows, memories.models.Embedding): their distances aggregated (the project's
search.window_aggregate); each memory comes back once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memories.models import EmbeddingSpace, Project
from memories.services.search.filters import SearchFilters, id_array
from memories.services.search.neighbours import link_read


@dataclass(frozen=True, slots=True)
class VectorRequest:
    """What a vector step is asked: the ``limit`` memories of the filtered set (of
    ``size`` rows) nearest ``query``, a vector of ``space``; the neighbouring turns of
    those of the first ``link_limit`` (None: all) not in ``linked`` (None: no neighbours
    wanted), and of ``link_ids`` (another signal's candidates: their links come in the
    same statement); the distances of ``distance_ids`` and of those neighbours. A
    memory's distance is the ``aggregate`` (mean or max similarity) of its windows'."""

    project: Project
    space: EmbeddingSpace
    query: np.ndarray
    filters: SearchFilters
    limit: int
    size: int
    linked: set[Any] | None = None
    distance_ids: list[Any] = field(default_factory=list)
    aggregate: str = "mean"
    link_limit: int | None = None
    link_ids: list[Any] = field(default_factory=list)


@dataclass
class VectorSignal:
    nearest: list[tuple[Any, float]]  # (memory id, cosine distance), nearest first
    links: dict[Any, list[Any]]  # message id -> its neighbouring turns' ids
    distances: dict[Any, float]  # memory id -> cosine distance
    # the linked turns' and their neighbours' sizes in bytes (neighbours.links_sql)
    sizes: dict[Any, int] = field(default_factory=dict)


def window_sql(aggregate: str) -> str:
    """The SQL aggregate of a memory's window distances: the mean similarity is the
    mean distance, the max similarity the min distance."""
    return {"mean": "avg", "max": "min"}[aggregate]


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


def scan_params(request: VectorRequest, given: dict[str, Any]) -> dict[str, Any]:
    """The parameters of a scan's statement (exact.py, compact.py): ``given`` (the
    filters', the links', the scan's own) and the request's. The links are looked up
    for the nearest rows not in ``request.linked`` and for ``request.link_ids``."""
    linked = request.linked
    return {
        **given,
        "query_vector": vector_literal(request.query),
        "limit": request.limit,
        "link_known": id_array(linked or []),
        "with_links": linked is not None,
        "distance_ids": id_array(request.distance_ids),
        "link_limit": request.link_limit,
        "link_ids": id_array(request.link_ids),
    }


def signal_read(rows: list[Any]) -> tuple[VectorSignal, int, int]:
    """A scan's rows (part, memory id, distance, then a link's columns) as a
    VectorSignal, nearest first: part 0 the nearest, 1 the links, 2 the distances
    asked for; and the counts parts 3 and 4 carry (0 when absent: the compact scan's
    shortlisted windows and rows read again since the codes' load, compact.py)."""
    signal = VectorSignal([], {}, {})
    scanned = delta = 0
    for part, memory_id, distance, *link in rows:
        if part == 0:
            signal.nearest.append((memory_id, float(distance)))
        elif part == 1:
            link_read(signal.links, signal.sizes, [memory_id, *link])
        elif part == 2:
            signal.distances[memory_id] = float(distance)
        elif part == 3:
            scanned = int(distance)
        else:
            delta = int(distance)
    signal.nearest.sort(key=lambda row: row[1])
    return signal, scanned, delta
