"""The runtimes of the local models (settings.EMBEDDING["RUNTIME"]): the same weights
of a packaged model (all-MiniLM-L6-v2 or all-mpnet-base-v2, memories.providers.model_files)
run by

* ``torch``: sentence-transformers on torch, as packaged;
* ``onnx-fp32`` / ``onnx-int8``: ONNX Runtime on the graphs memories.providers.onnx_export made
  from the model's weights (float32, or int8 dynamically quantized), with the HF
  ``tokenizers`` package reading the model folder's tokenizer.json. Neither imports
  torch nor sentence-transformers: a web process that embeds queries stays small.

Each gives unit-length float32 vectors, the model's word-piece offsets (for windows)
and a settable number of intra-op threads.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from memories.providers.model_files import MINILM, model_folder, tokenizer_load
from memories.providers.onnx_export import GRAPHS, onnx_ensure

RUNTIMES = ("torch", "onnx-fp32", "onnx-int8")
DEFAULT_RUNTIME = "onnx-int8"  # the fastest within 0.5 recall points of torch (BENCHMARKS.md)


class ModelRuntime(Protocol):
    dimension: int
    max_seq_length: int  # word pieces the model reads, its two markers included

    def encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in the texts' order."""
        ...

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """The (start, end) characters of each of the text's word pieces, no markers."""
        ...

    def threads_set(self, threads: int) -> None:
        """Intra-op threads for the calls that follow (>= 1)."""
        ...


class TorchRuntime:
    """sentence-transformers on torch (imports both)."""

    def __init__(self, threads: int, *, model: str = MINILM, data_dir: Path | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        if threads:
            torch.set_num_threads(threads)
        folder = model_folder(model, data_dir)
        self.model = cast(Any, SentenceTransformer(str(folder), device="cpu"))
        self.dimension = int(self.model.get_embedding_dimension())
        self.max_seq_length = int(self.model.max_seq_length)
        self.tokenizer = self.model.tokenizer

    def encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        vectors = self.model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        encoded = self.tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        return [tuple(pair) for pair in encoded["offset_mapping"]]

    def threads_set(self, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)


class WordPieces:
    """The ONNX runtimes' tokenizer, callable as a transformers tokenizer for what
    callers ask of one: ``tokenizer(text, add_special_tokens=False)["input_ids"]``."""

    def __init__(self, *, model: str = MINILM, data_dir: Path | None = None) -> None:
        self._tokenizer = tokenizer_load(max_length=None, model=model, data_dir=data_dir)

    def __call__(
        self,
        text: str,
        *,
        add_special_tokens: bool = True,
        return_offsets_mapping: bool = False,
        verbose: bool = True,
    ) -> dict[str, list[Any]]:
        encoded = self._tokenizer.encode(text, add_special_tokens=add_special_tokens)
        result: dict[str, list[Any]] = {
            "input_ids": encoded.ids,
            "attention_mask": encoded.attention_mask,
        }
        if return_offsets_mapping:
            result["offset_mapping"] = encoded.offsets
        return result


class OnnxRuntime:
    """ONNX Runtime on one exported graph; the session is made at the first call after
    a thread change (onnxruntime fixes a session's threads when it is made)."""

    def __init__(
        self,
        graph: Path,
        *,
        threads: int,
        dimension: int,
        max_seq_length: int,
        model: str = MINILM,
        data_dir: Path | None = None,
    ) -> None:
        self.graph = graph
        self.dimension = dimension
        self.max_seq_length = max_seq_length
        self.tokenizer = WordPieces(model=model, data_dir=data_dir)
        self._inputs = tokenizer_load(max_length=max_seq_length, model=model, data_dir=data_dir)
        self._threads = threads or os.cpu_count() or 1
        self._session: Any = None
        self._lock = threading.Lock()

    def session(self) -> Any:
        with self._lock:
            if self._session is None:
                import onnxruntime

                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
                options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
                # idle threads sleep instead of spinning: the cores are shared with
                # PostgreSQL and the other processes
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                self._session = onnxruntime.InferenceSession(
                    str(self.graph), options, providers=["CPUExecutionProvider"]
                )
            return self._session

    def encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        """Longest texts first, as sentence-transformers does: a batch pads to its
        longest text, and texts of like length waste little on padding."""
        session = self.session()
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda n: -len(texts[n]))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            encoded = self._inputs.encode_batch([texts[n] for n in rows])
            feed = {
                "input_ids": np.asarray([item.ids for item in encoded], dtype=np.int64),
                "attention_mask": np.asarray(
                    [item.attention_mask for item in encoded], dtype=np.int64
                ),
            }
            vectors[rows] = session.run(None, feed)[0]
        return vectors

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return list(
            self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)[
                "offset_mapping"
            ]
        )

    def threads_set(self, threads: int) -> None:
        with self._lock:
            if threads != self._threads:
                self._threads = threads
                self._session = None


def runtime_load(
    runtime: str,
    *,
    threads: int,
    onnx_folder: Path,
    model: str = MINILM,
    data_dir: Path | None = None,
) -> ModelRuntime:
    """The local ``model`` (a key of model_files.LOCAL_MODELS) on ``runtime`` (one of
    RUNTIMES); an ONNX runtime exports its graphs into ``onnx_folder`` first if they are
    missing (memories.providers.onnx_export). ``data_dir`` is where all-mpnet-base-v2 is
    assembled (settings.DATA_DIR). Raises ValueError for an unknown runtime,
    onnx_export.ExportError if the export fails, model_files.ModelNotInstalled if the
    model's packages are missing, model_files.ModelFilesInvalid (a ValueError) if its
    files fail their checksums."""
    if runtime == "torch":
        return TorchRuntime(threads, model=model, data_dir=data_dir)
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown EMBEDDING_RUNTIME {runtime!r}: one of {', '.join(RUNTIMES)}")
    manifest = onnx_ensure(folder=onnx_folder, model=model, data_dir=data_dir)
    return OnnxRuntime(
        onnx_folder / GRAPHS[runtime],
        threads=threads,
        dimension=int(manifest["dimension"]),
        max_seq_length=int(manifest["max_seq_length"]),
        model=model,
        data_dir=data_dir,
    )
