"""Vector candidates: the memories nearest the query vector (cosine, pgvector), by the
scan that suits the filtered set: one user's through the compact scan of their binary
codes (compact.py), other small sets by the float exact scan (exact.py), larger ones by
the space's HNSW index (hnsw.py); the neighbours of the nearest turns and the distances
of other candidates come with them (signal.py says what a step is asked and gives)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from django.conf import settings

from memories.models import EmbeddingSpace, Project
from memories.services.search.compact import compact_scan_applies, compact_vector_candidates
from memories.services.search.count import collection_size_get
from memories.services.search.exact import exact_vector_candidates, neighbours_and_distances
from memories.services.search.filters import SearchFilters
from memories.services.search.hnsw import index_vector_candidates
from memories.services.search.signal import VectorRequest, VectorSignal


def exact_scan_max_rows() -> int:
    return int(settings.RETRIEVAL["EXACT_SCAN_MAX_ROWS"])


def exact_scan(size: int) -> bool:
    """Whether a filtered set of ``size`` rows is scanned exactly rather than by HNSW."""
    return size <= exact_scan_max_rows()


def vector_signal_get(request: VectorRequest) -> VectorSignal:
    """What ``request`` asks (VectorRequest): the nearest memories, their neighbouring
    turns and the distances asked for. An exact scan does it in one round trip, the
    index in two or three. One user's set of more than a few rows goes through the
    compact scan (compact.py) unless it is too large for that too; other sets by the
    float exact scan up to EXACT_SCAN_MAX_ROWS, past it by the index."""
    size = request.size
    if compact_scan_applies(request.filters, size):
        signal = compact_vector_candidates(request)
        if signal is not None:
            return signal
        size = 0  # the filters dropped most of the user's rows: scan exactly
    if exact_scan(size):
        return exact_vector_candidates(request)
    return _index_signal(request, size=size)


def _index_signal(request: VectorRequest, *, size: int) -> VectorSignal:
    """``vector_signal_get`` through the index: the nearest memories, then their
    neighbours and the distances asked for in a statement of their own."""
    nearest = index_vector_candidates(request, size=size)
    found = {memory_id for memory_id, _ in nearest}
    linked = request.linked
    # the nearest rows' neighbours; the neighbours' own neighbours are not wanted
    first = nearest[: request.link_limit]  # None: all
    unlinked = [m for m, _ in first if m not in linked] if linked is not None else []
    wanted = list(dict.fromkeys([*request.link_ids, *unlinked]))
    unscored = [memory_id for memory_id in request.distance_ids if memory_id not in found]
    if not (wanted or unscored):
        return VectorSignal(nearest, {}, {})
    around = neighbours_and_distances(replace(request, link_ids=wanted, distance_ids=unscored))
    return VectorSignal(nearest, around.links, around.distances, around.sizes)


def vector_candidates(
    *,
    project: Project,
    space: EmbeddingSpace,
    query: np.ndarray,
    filters: SearchFilters,
    limit: int,
    aggregate: str = "mean",
) -> list[tuple[Any, float]]:
    """(memory id, cosine distance) of the nearest embedded memories, nearest first,
    by the scan ``vector_signal_get`` chooses for the filtered set."""
    size = collection_size_get(project=project, filters=filters)
    request = VectorRequest(
        project=project,
        space=space,
        query=query,
        filters=filters,
        limit=limit,
        size=size,
        aggregate=aggregate,
    )
    return vector_signal_get(request).nearest
