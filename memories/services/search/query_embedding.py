"""The query's vector: embedded on a background thread, below the search's own
(providers/threads.py), so that PostgreSQL runs the count and the keyword query meanwhile
(the model releases the GIL)."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from memories.models import EmbeddingSpace
from memories.providers.embeddings import EmbeddingProvider, get_provider, query_cache
from memories.providers.kept import Kept
from memories.services.embedding import embedding_space_get

# how long a web process keeps the configured model's embedding space: a search read it
# with every query (an ORM get_or_create: ~0.9 ms of each context), and a space, once
# made, does not change (a new model or dimension is another space)
SPACE_SECONDS = 60.0
_spaces: Kept[EmbeddingSpace] = Kept(SPACE_SECONDS)


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
    query: str | None, embedding: list[float] | None, space: EmbeddingSpace | None = None
) -> QueryEmbedding | None:
    """The query's vector (``embedding`` as given, in ``space`` when the caller knows it,
    else ``query`` embedded), started; None when there is neither."""
    if embedding is None and not query:
        return None
    provider = get_provider()
    if embedding is not None:
        given: Future[np.ndarray] = Future()
        given.set_result(np.asarray(embedding, dtype=np.float32))
        return QueryEmbedding(space=space or query_space_get(provider), pending=given)
    submitted = time.perf_counter()
    pending = query_cache.submit(provider, query or "")
    embedded: list[float] = []
    pending.add_done_callback(lambda _: embedded.append(time.perf_counter()))
    return QueryEmbedding(
        space=query_space_get(provider),
        pending=pending,
        submitted=submitted,
        embedded=embedded,
    )


def query_space_get(provider: EmbeddingProvider) -> EmbeddingSpace:
    """The provider's embedding space (embedding_space_get), kept SPACE_SECONDS."""
    key = (provider.name, provider.model, provider.dimension)
    if (space := _spaces.get(key)) is None:
        space = embedding_space_get(provider=provider)
        _spaces.put(key, space)
    return space


def query_spaces_forget() -> None:
    """Forget the kept spaces (tests: the next test's database is another)."""
    _spaces.clear()
