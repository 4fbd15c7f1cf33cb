#!/usr/bin/env python
"""What long memories cost to embed: throughput, windows and peak memory, whole versus
truncated.

    make bench-long
    .venv/bin/python bench/long_memories.py --quick
    .venv/bin/python bench/long_memories.py --json OUT.json --keep

Three sizes of synthetic English-like text (a fixed word list, a seeded generator; no
data set): short (10-30 words, a chat turn), long (100-900 words, about 310 on average,
an assistant's answer) and maximum (MEMORYHUB_MAX_CONTENT_CHARS characters, 32,000 by
default). Each size is written as pending Memory rows of a scratch project and embedded
by ``embedding_run``, the worker's service, twice:

* windowed: the current code, every window of the model's tokens a vector
  (EMBEDDING_WINDOW_TOKENS, EMBEDDING_WINDOW_OVERLAP);
* truncated: the behaviour before windows, the provider's ``windows`` patched to the
  whole text, so the model reads its first 256 word pieces and drops the rest.

The two modes embed different texts of the same lengths (a vector the space already
holds for a text is copied, not embedded). The report gives memories/s and windows/s
per size and mode, wall and CPU time, the cost of whole memories (the ratio of the
time per memory), the time ``provider.windows`` takes per memory (the tokenizing the
worker adds), and first, per mode, the peak resident memory of a fresh process
embedding maximum-size memories batch by batch with the configured claim size
(EMBEDDING_CLAIM_SIZE): ru_maxrss once the model is loaded and after the last batch,
with the time per batch. Counts: COUNTS below, --peak-count for that phase.

Runs on the database the hub uses: the embedded PostgreSQL of the data folder
(MEMORYHUB_DATA_DIR, default var/), started or attached to, unless DATABASE_URL is set.
The worker's claim takes any pending memory, so it refuses to start while memories of
other projects wait. The scratch project is deleted at the end unless --keep. Other
work on the machine skews the figures: the report gives the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.evaluation_command import django_start  # noqa: E402
from bench.synthetic_text import texts_generate  # noqa: E402

if TYPE_CHECKING:
    from memories.models import Project
    from memories.providers.embeddings import EmbeddingProvider

SIZES = ("short", "long", "maximum")
MODES = ("truncated", "windowed")
# memories embedded per size and mode; the peak-memory phase's per mode: the old way a
# whole claim of maximum-size memories in one batch, windowed a few full batches of
# WINDOWS_PER_MEMORY x the claim windows (later batches are alike, and a batch of ~1,000
# windows takes minutes on 2 cores)
COUNTS: dict[str, dict[str, Any]] = {
    "full": {
        "short": 1_000, "long": 300, "maximum": 32,
        "peak": {"truncated": 256, "windowed": 64},
    },
    "quick": {
        "short": 200, "long": 60, "maximum": 8,
        "peak": {"truncated": 64, "windowed": 32},
    },
}  # fmt: skip
WRITE_CHUNK = 500

# --- the measurements -----------------------------------------------------------------


@contextmanager
def windows_mode(provider: EmbeddingProvider, mode: str) -> Iterator[None]:
    """The provider windowing texts (``windowed``), or, ``truncated``, reading each text
    whole as before windows: the model keeps its first 256 word pieces."""
    if mode == "windowed":
        yield
        return
    provider.windows = lambda text: [(0, len(text))]  # type: ignore[method-assign]
    try:
        yield
    finally:
        del provider.windows  # the class's method again


def memories_write(project: Project, texts: list[str], *, size: str, mode: str) -> None:
    """The texts as message memories waiting for their vectors, as a write leaves them
    (no task queued: the caller embeds them)."""
    from memories.models import Memory, content_hash

    for start in range(0, len(texts), WRITE_CHUNK):
        Memory.objects.bulk_create(
            Memory(
                project=project,
                kind=Memory.Kind.MESSAGE,
                role=Memory.Role.ASSISTANT,
                content=text,
                content_hash=content_hash(text),
                metadata={"bench": "long_memories", "size": size, "mode": mode},
            )
            for text in texts[start : start + WRITE_CHUNK]
        )


def memories_forget(project: Project, *, keep: bool) -> None:
    """The phase's memories and their vectors gone, unless kept."""
    if not keep:
        project.memories.all().delete()


def pieces(provider: Any, texts: list[str]) -> float:
    """Mean word pieces per text (the model's tokenizer, no markers)."""
    model = provider.load()
    counts = [len(model.offsets(text)) for text in texts]
    return sum(counts) / len(counts)


def windows_timed(provider: EmbeddingProvider, texts: list[str]) -> dict[str, Any]:
    """Milliseconds ``provider.windows`` takes per text, and the windows per text."""
    provider.windows(texts[0])  # warm
    started = time.perf_counter()
    counts = [len(provider.windows(text)) for text in texts]
    seconds = time.perf_counter() - started
    return {
        "texts": len(texts),
        "ms_per_memory": round(1000 * seconds / len(texts), 3),
        "windows_per_memory": round(sum(counts) / len(counts), 2),
    }


def throughput(
    project: Project, texts: list[str], *, size: str, mode: str, claim: int
) -> dict[str, Any]:
    """Write ``texts`` pending, embed them all with ``embedding_run`` and time it (wall
    and this process's CPU time: the tokenizer, the model, Django; not PostgreSQL's)."""
    from memories.models import Embedding
    from memories.providers.embeddings import get_provider
    from memories.services.embedding import embedding_pending_count, embedding_run

    provider = get_provider()
    memories_write(project, texts, size=size, mode=mode)
    batches: list[int] = []
    with windows_mode(provider, mode):
        started, cpu_started = time.perf_counter(), time.process_time()
        embedded = embedding_run(batch_size=claim, progress=batches.append)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    if embedded != len(texts) or embedding_pending_count():
        raise RuntimeError(f"{size}/{mode}: embedded {embedded} of {len(texts)}")
    windows = Embedding.objects.filter(memory__project=project).count()
    return {
        "size": size,
        "mode": mode,
        "memories": len(texts),
        "chars_per_memory": round(sum(map(len, texts)) / len(texts)),
        "pieces_per_memory": round(pieces(provider, texts), 1),
        "windows": windows,
        "windows_per_memory": round(windows / len(texts), 2),
        "batches": len(batches),
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "memories_per_s": round(len(texts) / seconds, 1),
        "windows_per_s": round(windows / seconds, 1),
    }


def memory_status() -> dict[str, int]:
    """This process's VmRSS and VmHWM (its own peak, not inherited), in MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {name: int(fields[name].split()[0]) // 1024 for name in ("VmRSS", "VmHWM")}


def peak_child(mode: str) -> dict[str, Any]:
    """In a fresh process: embed every pending memory batch by batch, as a worker does,
    with the peak RSS once the model is loaded (and has embedded one text, as the
    worker's start-up check does) and after the last batch."""
    from django.conf import settings

    from memories.providers.embeddings import get_provider, torch_threads_set
    from memories.services.embedding import embedding_process_batch, embedding_space_get

    provider = get_provider()
    provider.load()  # type: ignore[attr-defined]
    torch_threads_set(settings.EMBEDDING["TORCH_THREADS"] or None)
    provider.embed(["MemoryHub start-up check"])
    space = embedding_space_get(provider=provider)
    claim = settings.EMBEDDING["CLAIM_SIZE"]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
    batches = []
    with windows_mode(provider, mode):
        while True:
            started = time.perf_counter()
            done = embedding_process_batch(space=space, provider=provider, size=claim)
            if not done:
                break
            batches.append((done, time.perf_counter() - started))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds = [s for _, s in batches]
    status = memory_status()
    return {
        "mode": mode,
        "claim_size": claim,
        "torch_threads": torch_threads(),
        "memories": sum(done for done, _ in batches),
        "batches": len(batches),
        "memories_per_batch": [done for done, _ in batches],
        "s_per_batch_mean": round(sum(seconds) / len(seconds), 2),
        "s_per_batch_max": round(max(seconds), 2),
        "rss_before_mb": before // 1024,  # ru_maxrss with the model loaded
        "rss_peak_mb": after // 1024,  # ru_maxrss after the last batch
        "vm_hwm_mb": status["VmHWM"],
        "rss_at_end_mb": status["VmRSS"],
    }


def peak_measure(project: Project, texts: list[str], *, mode: str, keep: bool) -> dict[str, Any]:
    """``texts`` written pending and embedded by a fresh process (peak_child).

    Linux carries a process's ru_maxrss over fork and exec: the child reports at least
    this process's own peak, which ``inherited_mb`` gives (keep it small: measure first).
    """
    memories_write(project, texts, size="maximum", mode=f"peak-{mode}")
    inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    result = subprocess.run(
        [sys.executable, __file__, "--peak-child", mode],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode:
        raise RuntimeError(f"the peak-memory process failed:\n{result.stderr[-3000:]}")
    memories_forget(project, keep=keep)
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report | {"inherited_mb": inherited}


def torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


# --- the report -----------------------------------------------------------------------


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


COLUMNS = [  # (heading, key, width)
    ("memories", "memories", 8), ("chars/mem", "chars_per_memory", 9),
    ("pieces/mem", "pieces_per_memory", 10), ("windows/mem", "windows_per_memory", 11),
    ("batches", "batches", 7), ("seconds", "seconds", 8), ("cpu s", "cpu_seconds", 8),
    ("memories/s", "memories_per_s", 10), ("windows/s", "windows_per_s", 9),
]  # fmt: skip


def table_print(report: dict[str, Any]) -> None:
    """The throughput rows, the cost of whole memories, tokenizing, peak memory."""
    print(
        f"{report['counts_label']} run, claim size {report['claim_size']}, torch threads "
        f"{report['torch_threads']}, window {report['window_tokens']} pieces, overlap "
        f"{report['window_overlap']}; load average {report['load_average_at_start']} at "
        f"start, {report['load_average_at_end']} at end"
    )
    print(f"{'size':<8} {'mode':<9} " + " ".join(f"{name:>{w}}" for name, _, w in COLUMNS))
    for row in report["throughput"]:
        print(
            f"{row['size']:<8} {row['mode']:<9} "
            + " ".join(f"{row[key]:>{w}}" for _, key, w in COLUMNS)
        )
    print(
        "whole memories cost (windowed / truncated, per memory): "
        + ", ".join(
            f"{size} {ratio['seconds']}x ({ratio['cpu_seconds']}x CPU)"
            for size, ratio in report["cost_ratio"].items()
        )
    )
    print(
        "provider.windows (tokenizing) per memory: "
        + ", ".join(
            f"{size} {row['ms_per_memory']} ms ({row['texts']} texts)"
            for size, row in report["tokenizing"].items()
        )
    )
    for row in report["peak"]:
        print(
            f"peak RSS, {row['mode']}: {row['memories']} maximum-size memories in "
            f"{row['batches']} batches {row['memories_per_batch']} (claim "
            f"{row['claim_size']}), {row['s_per_batch_mean']} s per batch (max "
            f"{row['s_per_batch_max']}); ru_maxrss {row['rss_before_mb']} MB with the model "
            f"loaded, {row['rss_peak_mb']} MB after (+{row['rss_peak_mb'] - row['rss_before_mb']}"
            f" MB; VmHWM {row['vm_hwm_mb']} MB, RSS at the end {row['rss_at_end_mb']} MB)"
        )


def cost_ratios(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per size: the windowed mode's wall and CPU seconds per memory over the truncated
    mode's."""
    by = {(row["size"], row["mode"]): row for row in rows}
    return {
        size: {
            key: round(
                (by[size, "windowed"][key] / by[size, "windowed"]["memories"])
                / (by[size, "truncated"][key] / by[size, "truncated"]["memories"]),
                2,
            )
            for key in ("seconds", "cpu_seconds")
        }
        for size in SIZES
        if (size, "windowed") in by and (size, "truncated") in by
    }


# --- the run --------------------------------------------------------------------------


def peak_phase(project: Project, args: argparse.Namespace, counts: dict[str, Any]) -> list[Any]:
    """Peak memory per mode, each in a fresh process."""
    rows = []
    for mode in MODES:
        texts = texts_generate(
            "maximum", args.peak_count or counts["peak"][mode], seed=args.seed,
            variant=f"peak-{mode}", max_chars=args.max_chars,
        )  # fmt: skip
        rows.append(peak_measure(project, texts, mode=mode, keep=args.keep))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def throughput_phase(
    project: Project, args: argparse.Namespace, counts: dict[str, Any], report: dict[str, Any]
) -> None:
    """Tokenizing per size, then throughput per size and mode, in this process."""
    from django.conf import settings

    from memories.providers.embeddings import get_provider, torch_threads_set

    provider = get_provider()
    provider.load()  # type: ignore[attr-defined]
    torch_threads_set(settings.EMBEDDING["TORCH_THREADS"] or None)  # as the worker's pool
    report["torch_threads"] = torch_threads()
    provider.embed(["warming up the model", "a second text"] * 8)
    texts = {
        (size, mode): texts_generate(
            size, counts[size], seed=args.seed, variant=mode, max_chars=args.max_chars
        )
        for size in SIZES
        for mode in MODES
    }
    report["tokenizing"] = {
        size: windows_timed(provider, texts[size, "windowed"]) for size in SIZES
    }
    report["throughput"] = []
    for size in SIZES:
        for mode in MODES:
            claim = report["claim_size"]
            row = throughput(project, texts[size, mode], size=size, mode=mode, claim=claim)
            print(json.dumps(row), file=sys.stderr, flush=True)
            report["throughput"].append(row)
            memories_forget(project, keep=args.keep)
    report["cost_ratio"] = cost_ratios(report["throughput"])


def bench_run(args: argparse.Namespace) -> dict[str, Any]:
    """Every phase on a scratch project, peak memory first (the children inherit this
    process's peak RSS); Django set up."""
    from django.conf import settings

    from memories.models import Memory, Project

    if waiting := Memory.objects.pending_embedding().count():
        raise RuntimeError(
            f"{waiting} memories wait for vectors in this database: the benchmark's "
            "embedding would take them too (use another MEMORYHUB_DATA_DIR)"
        )
    counts = COUNTS["quick" if args.quick else "full"]
    args.max_chars = settings.MEMORYHUB["MAX_CONTENT_CHARS"]
    report: dict[str, Any] = {
        "counts_label": "quick" if args.quick else "full",
        "counts": counts | ({"peak": args.peak_count} if args.peak_count else {}),
        "seed": args.seed,
        "load_average_at_start": load_average(),
        "claim_size": settings.EMBEDDING["CLAIM_SIZE"],
        "window_tokens": settings.EMBEDDING["WINDOW_TOKENS"] or "the model's",
        "window_overlap": settings.EMBEDDING["WINDOW_OVERLAP"],
        "max_content_chars": args.max_chars,
    }
    project = Project.objects.create(name=f"bench-long-{secrets.token_hex(4)}")
    print(f"scratch project {project.name}", file=sys.stderr, flush=True)
    try:
        report["peak"] = peak_phase(project, args, counts)
        throughput_phase(project, args, counts, report)
    finally:
        if not args.keep:
            project.delete()
    report["load_average_at_end"] = load_average()
    table_print(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer memories (a try-out)")
    parser.add_argument(
        "--peak-count", type=int, help="maximum-size memories the peak-memory phase embeds "
        "per mode (default: 256 truncated, 64 windowed; quick 64 and 32)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=7, help="the text generator's seed")
    parser.add_argument("--keep", action="store_true", help="keep the scratch project")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    # the peak-memory phase's fresh process (bench_run starts it)
    parser.add_argument("--peak-child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.peak_count is not None and args.peak_count < 1:
        parser.error("--peak-count must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    django_start()
    if args.peak_child:
        print(json.dumps(peak_child(args.peak_child)))
        return 0
    bench_run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
