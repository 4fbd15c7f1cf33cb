#!/usr/bin/env python
"""A local model's runtimes side by side (EMBEDDING_RUNTIME: torch, onnx-fp32,
onnx-int8), on LoCoMo turns and questions:

    .venv/bin/python bench/runtimes.py ../shared/data/locomo-dev.json
    .venv/bin/python bench/runtimes.py PATH --model all-mpnet-base-v2 --turns 256
    .venv/bin/python bench/runtimes.py PATH --recall            # + bench/evaluate.py per runtime
    .venv/bin/python bench/runtimes.py PATH --recall --mixed    # + torch memories, ONNX queries
    .venv/bin/python bench/runtimes.py PATH --runtimes torch,onnx-int8 --json OUT.json

Per runtime, in a fresh process each (so its imports and memory are its own), through
the provider the hub uses (memories.providers.embeddings.LocalEmbeddingProvider), with
--model as EMBEDDING_MODEL (all-MiniLM-L6-v2 by default) and --turns the first N turns
and questions (all by default: all-mpnet-base-v2 embeds some ten times slower):

* ``per_second``: texts per second embedding every turn in calls of EMBEDDING_BATCH_SIZE
  (64) in arrival order, as the worker embeds its claims, on EMBEDDING_TORCH_THREADS
  threads (0: one per core); ``sorted_per_second``: all turns in one call (the runtime
  sorts them by length: less padding);
* ``query_ms``: each question embedded alone on EMBEDDING_QUERY_TORCH_THREADS threads,
  as a web process embeds a search's query (p50, p95);
* ``rss_mib``: the process's resident memory once the model has embedded one text, and
  whether torch was imported.

--recall then runs bench/evaluate.py on PATH once per runtime, one after another (on the
database of MEMORYHUB_DATA_DIR; each run loads, embeds and deletes its own project), and
reports recall@10 per search mode. --mixed also evaluates memories embedded by torch
searched with each ONNX runtime's query vectors: a hub that switches runtime without
re-embedding. The load average is printed before and after each measurement: the
figures mean little on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

RUNTIMES = ("torch", "onnx-fp32", "onnx-int8")
MODELS = {"all-MiniLM-L6-v2": 384, "all-mpnet-base-v2": 768}  # EMBEDDING_DIMENSION of each


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[0]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(ordered[len(ordered) // 2], 2),
        "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 2),
        "mean": round(sum(ordered) / len(ordered), 2),
    }


def measure(runtime: str, path: Path, *, model: str, turns_max: int) -> dict[str, Any]:
    """One runtime's throughput, query latency and memory, in this process."""
    os.environ["EMBEDDING_RUNTIME"] = runtime
    os.environ["EMBEDDING_PROVIDER"] = "local"
    os.environ["EMBEDDING_MODEL"] = model
    os.environ["EMBEDDING_DIMENSION"] = str(MODELS[model])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
    import django

    django.setup()
    from django.conf import settings

    from bench.locomo import locomo_dataset
    from memories.providers.embeddings import get_provider, torch_threads_set

    dataset = locomo_dataset(path)
    turns = [message.content for dialogue in dataset.dialogues for message in dialogue.messages]
    questions = [probe.text for dialogue in dataset.dialogues for probe in dialogue.probes]
    if turns_max:
        turns, questions = turns[:turns_max], questions[:turns_max]
    config = settings.EMBEDDING
    provider = get_provider()
    started = time.perf_counter()
    provider.embed(["MemoryHub start-up check"])
    result: dict[str, Any] = {
        "model": model,
        "runtime": runtime,
        "load_s": round(time.perf_counter() - started, 2),
        "rss_mib": rss_mib(),
        "torch_imported": "torch" in sys.modules,
        "turns": len(turns),
        "questions": len(questions),
    }
    batch = config["BATCH_SIZE"]
    torch_threads_set(config["TORCH_THREADS"] or None)
    provider.embed(turns[:batch])  # warm
    started = time.perf_counter()
    for start in range(0, len(turns), batch):
        provider.embed(turns[start : start + batch])
    result["per_second"] = round(len(turns) / (time.perf_counter() - started), 1)
    started = time.perf_counter()
    provider.embed(turns)
    result["sorted_per_second"] = round(len(turns) / (time.perf_counter() - started), 1)
    torch_threads_set(config["QUERY_TORCH_THREADS"] or config["TORCH_THREADS"] or None)
    provider.embed(questions[:5])
    latencies = []
    for question in questions:
        started = time.perf_counter()
        provider.embed([question])
        latencies.append((time.perf_counter() - started) * 1000)
    result["query_ms"] = percentiles(latencies)
    result["rss_mib_after"] = rss_mib()
    return result


def measured(runtime: str, path: Path, *, model: str, turns_max: int) -> dict[str, Any]:
    """``measure`` in a child process, with the load average around it."""
    before = loadavg()
    done = subprocess.run(
        [sys.executable, __file__, str(path), "--child", runtime, "--model", model,
         "--turns", str(turns_max)],
        cwd=BASE_DIR, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"{runtime}: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["loadavg"] = f"{before} -> {loadavg()}"
    return result


def evaluated(
    path: Path, runtime: str, *, model: str, extra: list[str] | None = None
) -> dict[str, dict[str, float]]:
    """recall@10 and recall@5 per mode from bench/evaluate.py on ``runtime``."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        before = loadavg()
        subprocess.run(
            [sys.executable, str(BASE_DIR / "bench" / "evaluate.py"), str(path),
             "--json", str(report), *(extra or [])],
            cwd=BASE_DIR, check=True,
            env={**os.environ, "EMBEDDING_RUNTIME": runtime, "EMBEDDING_PROVIDER": "local",
                 "EMBEDDING_MODEL": model, "EMBEDDING_DIMENSION": str(MODELS[model])},
        )  # fmt: skip
        data = json.loads(report.read_text())
    modes = {
        mode["mode"]: {
            "recall@10": mode["groups"]["all"]["recall@10"],
            "recall@5": mode["groups"]["all"]["recall@5"],
        }
        for mode in data["modes"]
    }
    modes["loadavg"] = f"{before} -> {loadavg()}"  # type: ignore[assignment]
    return modes


def mixed_evaluated(path: Path, runtimes: list[str], *, model: str) -> dict[str, Any]:
    """Memories embedded by torch, queries by each ONNX runtime (one kept project)."""
    name = f"runtimes-mixed-{os.getpid()}"
    results = {"torch": evaluated(path, "torch", model=model, extra=["--keep"])}
    project_rename_newest(name)
    try:
        for runtime in runtimes:
            if runtime != "torch":
                results[runtime] = evaluated(path, runtime, model=model, extra=["--project", name])
    finally:
        project_delete(name)
    return results


def _django_snippet(code: str) -> None:
    subprocess.run(
        [sys.executable, "-c", "import django, os; "
         "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'memoryhub.settings'); "
         "django.setup(); from memoryhub import embedded; embedded.services_start(); "
         f"from memories.models import Project; {code}"],
        cwd=BASE_DIR, check=True,
    )  # fmt: skip


def project_rename_newest(name: str) -> None:
    _django_snippet(
        "p = Project.objects.filter(name__contains='-eval-').latest('id'); "
        f"p.name = {name!r}; p.save(update_fields=['name'])"
    )


def project_delete(name: str) -> None:
    _django_snippet(f"Project.objects.filter(name={name!r}).delete()")


def table_print(results: list[dict[str, Any]]) -> None:
    print(f"\n{results[0]['model']}, {results[0]['turns']} turns" if results else "")
    print(
        f"{'runtime':<10} {'texts/s (64s)':>13} {'one sorted':>10} {'query p50':>9} "
        f"{'p95 ms':>6} {'RSS MiB':>7} {'torch':>5}  load"
    )
    for r in results:
        print(
            f"{r['runtime']:<10} {r['per_second']:>13} {r['sorted_per_second']:>10} "
            f"{r['query_ms']['p50']:>9} {r['query_ms']['p95']:>6} {r['rss_mib']:>7} "
            f"{'yes' if r['torch_imported'] else 'no':>5}  {r['loadavg']}"
        )


def recall_print(title: str, recall: dict[str, dict[str, Any]]) -> None:
    print(f"\n{title}")
    for runtime, modes in recall.items():
        cells = "  ".join(
            f"{mode} {values['recall@10']}" for mode, values in modes.items() if mode != "loadavg"
        )
        print(f"{runtime:<10} recall@10: {cells}  (load {modes['loadavg']})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a LoCoMo .json file")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument("--model", default="all-MiniLM-L6-v2", choices=list(MODELS))
    parser.add_argument("--turns", type=int, default=0, help="the first N turns and questions")
    parser.add_argument("--recall", action="store_true", help="bench/evaluate.py per runtime")
    parser.add_argument("--mixed", action="store_true", help="torch memories, ONNX queries")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.path, model=args.model, turns_max=args.turns)))
        return 0
    runtimes = [name.strip() for name in args.runtimes.split(",") if name.strip()]
    report: dict[str, Any] = {"cpus": os.cpu_count(), "model": []}
    for runtime in runtimes:
        report["model"].append(measured(runtime, args.path, model=args.model, turns_max=args.turns))
        print(json.dumps(report["model"][-1]), flush=True)
    table_print(report["model"])
    if args.recall:
        report["recall"] = {
            runtime: evaluated(args.path, runtime, model=args.model) for runtime in runtimes
        }
        recall_print("LoCoMo, every runtime embedding memories and queries:", report["recall"])
    if args.mixed:
        report["mixed"] = mixed_evaluated(args.path, runtimes, model=args.model)
        recall_print("LoCoMo, memories embedded by torch, queries by:", report["mixed"])
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
