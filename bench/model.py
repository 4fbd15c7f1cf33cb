"""The bare embedding model in the benchmark process: the ceiling the hub's worker can
reach. It runs on the hub's runtime (EMBEDDING_RUNTIME, default onnx-int8) through
memories.providers.embedding_runtimes, as the hub's provider does, so the figures beside the hub's
are the same model on the same runtime (and vectors the bulk loader sums are in the
hub's space)."""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.client import summary
from memories.providers.embedding_runtimes import DEFAULT_RUNTIME, ModelRuntime, runtime_load
from memories.providers.model_files import MINILM
from memories.providers.onnx_export import onnx_folder


def runtime_name() -> str:
    """The runtime the hub will use: the same environment variable and default."""
    return os.environ.get("EMBEDDING_RUNTIME") or DEFAULT_RUNTIME


class BareModel:
    """The hub's model on its runtime, called as the worker calls it."""

    def __init__(self, runtime: ModelRuntime, name: str) -> None:
        self.runtime, self.name = runtime, name

    def encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        return self.runtime.encode(texts, batch_size=batch_size)

    def token_counts(self, texts: list[str]) -> list[int]:
        """Word pieces per text (markers excluded), before truncation."""
        return [len(self.runtime.offsets(text)) for text in texts]


def model_load(threads: int, data_dir: Path, model: str = MINILM) -> BareModel:
    """A local embedding model (the hub's default, all-MiniLM-L6-v2, unless ``model``)
    in this process, on ``threads`` threads; an ONNX runtime reads (or first exports)
    its graphs in the hub's data folder, under the same lock the hub takes
    (all-mpnet-base-v2 is assembled there too)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    name = runtime_name()
    runtime = runtime_load(
        name,
        threads=threads,
        onnx_folder=onnx_folder(data_dir, model=model),
        model=model,
        data_dir=data_dir,
    )
    return BareModel(runtime, name)


def model_throughput(
    *,
    texts: list[str],
    questions: list[str],
    threads: int,
    batch_size: int,
    sorted_too: bool,
    data_dir: Path,
) -> dict[str, Any]:
    """Texts per second encoding ``texts`` one ``batch_size`` call at a time, as the worker
    calls the model once per claimed batch (in claim order, so padding is the same), and
    milliseconds per question encoded alone, as a search embeds its query."""
    model = model_load(threads, data_dir)
    tokens = model.token_counts(texts)
    for _ in range(2):
        model.encode(texts[:batch_size], batch_size=batch_size)
    started = time.perf_counter()
    for i in range(0, len(texts), batch_size):
        model.encode(texts[i : i + batch_size], batch_size=batch_size)
    seconds = time.perf_counter() - started
    result: dict[str, Any] = {
        "runtime": model.name,
        "texts": len(texts),
        "threads": threads,
        "batch_size": batch_size,
        "mean_tokens": round(sum(tokens) / len(tokens), 1),
        "seconds": round(seconds, 2),
        "per_second": round(len(texts) / seconds, 1),
    }
    if sorted_too:  # one call: the runtime sorts its texts by length, less padding
        started = time.perf_counter()
        model.encode(texts, batch_size=batch_size)
        result["one_call_sorted_per_second"] = round(
            len(texts) / (time.perf_counter() - started), 1
        )
    model.runtime.threads_set(1)  # as EMBEDDING_QUERY_TORCH_THREADS in a web process
    single = []
    for question in questions:
        started = time.perf_counter()
        model.encode([question], batch_size=1)
        single.append((time.perf_counter() - started) * 1000)
    result["single_query_ms"] = summary(single)
    del model
    gc.collect()
    return result
