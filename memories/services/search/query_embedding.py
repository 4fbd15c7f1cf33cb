"""The query's vector: embedded on a background thread, below the search's own
(providers/threads.py), so that PostgreSQL runs the count and the keyword query meanwhile
(the model releases the GIL)."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from memories.models import EmbeddingSpace, Project
from memories.providers.embeddings import query_cache
from memories.services.embedding_spaces import project_space, space_provider, spaces_forget


@dataclass
class QueryEmbedding:
    """A query vector on its way, in the space it belongs to."""

    space: EmbeddingSpace
    pending: Future[np.ndarray]
    submitted: float | None = None  # when the query text went to be embedded
    embedded: list[float] = field(default_factory=list)  # when its vector was ready

    def wait(self, timings: dict[str, float]) -> np.ndarray:
        """The vector; for a query text, records ``embed_query`` (submit to ready) and
        ``embed_wait`` (how long the search waited for it) in ``timings``."""
        start = time.perf_counter()
        vector = self.pending.result()
        ready = time.perf_counter()
        if self.submitted is not None:
            # the callback runs just after result() can return: rarely, it has not yet
            timings["embed_query"] = ((self.embedded or [ready])[0] - self.submitted) * 1000
            timings["embed_wait"] = (ready - start) * 1000
        return vector


def query_embedding_start(
    query: str | None,
    embedding: list[float] | None,
    space: EmbeddingSpace | None = None,
    *,
    project: Project,
) -> QueryEmbedding | None:
    """The query's vector (``embedding`` as given, in ``space`` when the caller knows it,
    else ``query`` embedded by the model of the space ``project`` serves from),
    started; None when there is neither."""
    if embedding is None and not query:
        return None
    serving = space or project_space(project)
    if embedding is not None:
        given: Future[np.ndarray] = Future()
        given.set_result(np.asarray(embedding, dtype=np.float32))
        return QueryEmbedding(space=serving, pending=given)
    submitted = time.perf_counter()
    pending = query_cache.submit(space_provider(serving), query or "")
    embedded: list[float] = []
    pending.add_done_callback(lambda _: embedded.append(time.perf_counter()))
    return QueryEmbedding(space=serving, pending=pending, submitted=submitted, embedded=embedded)


def query_spaces_forget() -> None:
    """Forget the kept spaces (tests: the next test's database is another)."""
    spaces_forget()
