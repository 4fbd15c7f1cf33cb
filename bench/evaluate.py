#!/usr/bin/env python
"""Retrieval quality on LoCoMo and BEAM conversations, per search mode, beside plain BM25.

    .venv/bin/python bench/evaluate.py ../shared/data/locomo-dev.json
    .venv/bin/python bench/evaluate.py ../beam --size 100K --conversations 11-20
    .venv/bin/python bench/evaluate.py PATH --modes auto,keyword --json OUT.json
    .venv/bin/python bench/evaluate.py PATH --set search.neighbour_weight=0
    .venv/bin/python bench/evaluate.py PATH --keep          # keep the loaded project
    .venv/bin/python bench/evaluate.py PATH --project NAME  # evaluate a kept one

PATH says the format: a LoCoMo .json file (bench/locomo.py), or a BEAM folder
(bench/beam.py): the folder holding chats/, a chats/<size> folder (--size picks one
of several) or one conversation's folder; --conversations 11-20 (or 11,12,15) picks
conversations. Each conversation becomes one end user, each turn a message memory,
written through the normal write service and embedded by the worker's service. Every
question with evidence is then searched through the service the search API calls,
with the conversation's user as filter, and the evidence turns found in the top k give
recall@k (share of a question's evidence found) and hit@k (any found), over all
questions and per LoCoMo category or BEAM question type.

The row "bm25 (plain)" ranks the same stored texts of the same user with plain BM25
(bench/baseline.py), the baseline the keyword mode should match or beat. ``--set``
(repeatable) gives the evaluation project search settings of its own
(memories.config), to try a ranking weight without touching the defaults.

--json writes {"dataset", "description", "source", "conversations", "turns",
"questions", "skipped" (per group: questions without evidence), "order" (the table's
rows), "settings", "timings_s" (per phase), "modes": [{"mode", "groups": {"all" |
group: {"questions", "recall@5", "recall@10", "recall@20", "hit@5", "hit@10",
"hit@20"}}, "latency_ms"}]}, the plain BM25 row last.

Runs on the database the hub uses: the embedded PostgreSQL of the data folder
(MEMORYHUB_DATA_DIR, default var/), started or attached to, unless DATABASE_URL is
set. The data sets are read where they lie, never copied into the repository: LoCoMo
is CC BY-NC 4.0; BEAM has no licence, fetch it yourself (github
mohammadtavakoli78/BEAM) and use it for evaluation only.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.beam import BeamError, beam_dataset, beam_folders, conversations_parse  # noqa: E402
from bench.dataset import Dataset  # noqa: E402
from bench.evaluation_command import evaluation_main  # noqa: E402
from bench.locomo import locomo_dataset  # noqa: E402
from bench.rankings import (  # noqa: E402
    BM25_MODE,
    EvaluationError,
    bm25_ranker,
    hub_ranker,
    ranking_evaluate,
)
from memories.config import SEARCH_MODES, SettingsError, settings_validate  # noqa: E402

if TYPE_CHECKING:
    from memories.models import Project

COLUMNS = ["recall@5", "recall@10", "recall@20", "hit@10"]
WRITE_CHUNK = 500
# the namespace of the turns' ids (dataset_ingest)
EVALUATION_IDS = uuid.UUID("5b3f0d52-7a5e-4c1e-9a57-2f1d6c0e8b11")


class Clock:
    """Wall time per phase in seconds, each phase reported as it ends (the progress
    left in a log)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self.seconds[name] = round(time.perf_counter() - started, 1)
        print(f"{name}: {self.seconds[name]} s", file=sys.stderr, flush=True)


def progress_bar(total: int, desc: str, unit: str) -> Any:
    """A tqdm bar on stderr; off a terminal (a log file) it redraws every 30 s."""
    from tqdm import tqdm

    interval = 0.1 if sys.stderr.isatty() else 30.0
    return tqdm(total=total, desc=desc, unit=unit, mininterval=interval, file=sys.stderr)


# --- the data set ---------------------------------------------------------------------


def dataset_load(args: argparse.Namespace) -> Dataset:
    """PATH read in its format: a file is LoCoMo, a folder BEAM."""
    if args.path.is_file():
        return locomo_dataset(args.path)
    try:
        return beam_dataset(args.path, size=args.size, only=args.conversations)
    except BeamError as error:
        raise EvaluationError(str(error)) from error


def dataset_ingest(
    *, project: Project, dataset: Dataset, progress: Callable[[int], None] | None = None
) -> int:
    """Write every turn as a message memory (through the normal write service), each with
    an id derived from its user and position: rankings break ties by id, so random ids
    made two runs of the same code differ in the first decimal (hybrid's fused ranks tie
    often); these make every run of the same code give the same figures."""
    from memories.services.memories import MemoryInput, memory_create_batch
    from memories.services.revisions import Actor

    actor = Actor.system("evaluate")
    written = 0
    for dialogue in dataset.dialogues:
        items = [
            MemoryInput(
                content=message.content,
                user=dialogue.user,
                room=message.room,
                role=message.role,
                metadata=message.metadata,
                created_at=message.created_at,
                id=uuid.uuid5(EVALUATION_IDS, f"{dialogue.user}/{position}"),
            )
            for position, message in enumerate(dialogue.messages)
        ]
        for start in range(0, len(items), WRITE_CHUNK):
            chunk = items[start : start + WRITE_CHUNK]
            memory_create_batch(project=project, items=chunk, actor=actor)
            written += len(chunk)
            if progress:
                progress(len(chunk))
    return written


# --- the command line -----------------------------------------------------------------


def setting_parse(text: str) -> dict[str, dict[str, Any]]:
    """'search.keyword_weight=1.0' as overrides ({"search": {"keyword_weight": 1.0}});
    the value is JSON (a number, true, false) or else a string (a mode's name)."""
    name, equals, raw = text.partition("=")
    section, dot, setting = name.strip().partition(".")
    if not (equals and dot and section and setting):
        raise SettingsError({text: ["Expected SECTION.NAME=VALUE, e.g. search.rrf_k=40."]})
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw.strip()
    return {section: {setting: value}}


def settings_parse(texts: list[str]) -> dict[str, dict[str, Any]]:
    """The --set options as validated project settings overrides (memories.config)."""
    overrides: dict[str, dict[str, Any]] = {}
    for text in texts:
        for section, values in setting_parse(text).items():
            overrides.setdefault(section, {}).update(values)
    return settings_validate(overrides)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "path", type=Path, help="a LoCoMo .json file or a BEAM folder, e.g. ../beam"
    )
    parser.add_argument("--size", help="BEAM: the chats/ size folder, e.g. 100K")
    parser.add_argument("--conversations", help="BEAM: the conversations, e.g. 11-20 or 11,12")
    parser.add_argument(
        "--modes", default=",".join(SEARCH_MODES), help="comma-separated search modes"
    )
    parser.add_argument("--project", help="evaluate an already loaded project (else a new one)")
    parser.add_argument("--keep", action="store_true", help="keep the loaded project")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    parser.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="SECTION.NAME=VALUE",
        help="a search setting of the evaluated project, e.g. search.keyword_weight=1.0 "
        "(repeatable; the names and ranges are GET /api/v1/settings/'s schema)",
    )  # fmt: skip
    return parser


def _selection_check(args: argparse.Namespace) -> None:
    """--size and --conversations parsed and checked against PATH's folders."""
    if args.path.is_file():
        if args.size or args.conversations:
            raise BeamError("--size and --conversations select BEAM conversations, not LoCoMo")
        return
    if args.conversations is not None:
        args.conversations = conversations_parse(args.conversations)
    beam_folders(args.path, size=args.size, only=args.conversations)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed command line; exits naming the problem before anything starts."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.path.exists():
        parser.error(f"{args.path} does not exist")
    try:
        _selection_check(args)
    except BeamError as error:
        parser.error(str(error))
    args.modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = set(args.modes) - set(SEARCH_MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; choose from {list(SEARCH_MODES)}")
    try:
        args.settings = settings_parse(args.settings)
    except SettingsError as error:
        parser.error(f"--set: {error}")
    return args


# --- the evaluation -------------------------------------------------------------------


def project_load(dataset: Dataset, overrides: dict[str, Any], clock: Clock) -> Project:
    """A new project with every turn written and embedded, its settings ``overrides``."""
    from memories.models import Project
    from memories.services.embedding import embedding_pending_count, embedding_run

    name = f"{dataset.name}-eval-{secrets.token_hex(4)}"
    project = Project.objects.create(name=name, settings=overrides)
    with clock.phase("write"), progress_bar(dataset.turns, "write", "turn") as bar:
        dataset_ingest(project=project, dataset=dataset, progress=bar.update)
    with clock.phase("embed"), progress_bar(embedding_pending_count(), "embed", "turn") as bar:
        embedding_run(progress=bar.update)
    return project


@contextmanager
def project_settings_applied(project: Project, overrides: dict[str, Any]) -> Iterator[None]:
    """An existing project with ``overrides`` over its settings for the evaluation, its
    own settings back afterwards (both changes recorded as settings revisions)."""
    from memories.services.configuration import project_settings_update
    from memories.services.revisions import Actor

    if not overrides:
        yield
        return
    before = project.settings
    actor = Actor.system("evaluate")
    project_settings_update(project=project, changes=overrides, actor=actor)
    try:
        yield
    finally:
        project_settings_update(project=project, changes=before, actor=actor, replace=True)


@contextmanager
def evaluation_project(
    args: argparse.Namespace, dataset: Dataset, clock: Clock
) -> Iterator[Project]:
    """The project to evaluate: --project's, or a new one deleted afterwards unless --keep."""
    from memories.models import Project

    if args.project:
        project = Project.objects.filter(name=args.project).first()
        if project is None:
            raise EvaluationError(f"no project {args.project!r}")
        with project_settings_applied(project, args.settings):
            yield project
        return
    project = project_load(dataset, args.settings, clock)
    try:
        yield project
    finally:
        if not args.keep:
            project.delete()


def rankings_evaluate(
    project: Project, dataset: Dataset, modes: list[str], clock: Clock
) -> list[dict[str, Any]]:
    """A report per mode of ``modes``, then plain BM25's."""
    reports = []
    for mode in [*modes, BM25_MODE]:
        with clock.phase(mode), progress_bar(dataset.questions, mode, "q") as bar:
            ranker = (
                bm25_ranker(project=project, dataset=dataset)
                if mode == BM25_MODE
                else hub_ranker(project=project, dataset=dataset, mode=mode)
            )
            reports.append(
                ranking_evaluate(dataset=dataset, mode=mode, ranker=ranker, progress=bar.update)
            )
    return reports


def report_header_print(report: dict[str, Any]) -> None:
    """What was evaluated: the data set, its turns and questions (and those left out),
    the project settings tried; bench/context_eval.py's report starts so too."""
    skipped = ", ".join(f"{group} {count}" for group, count in report["skipped"].items())
    print(
        f"{report['description']}: {report['turns']} turns, {report['questions']} questions"
        + (f" (without evidence, left out: {skipped})" if skipped else "")
    )
    if report["settings"]:
        print(f"project settings: {json.dumps(report['settings'])}")


def table_print(report: dict[str, Any]) -> None:
    """The report as a table, a block of rows per mode."""
    report_header_print(report)
    mode_width = max(len(mode["mode"]) for mode in report["modes"])
    group_width = max(len("questions"), *(len(group) for group in report["order"]))
    print(
        f"{'mode':<{mode_width}} {'questions':<{group_width}} {'n':>4}  "
        + "  ".join(f"{column:>9}" for column in COLUMNS)
    )
    for mode in report["modes"]:
        name = mode["mode"]
        for group in report["order"]:
            row = mode["groups"].get(group)
            if row is not None:
                print(
                    f"{name:<{mode_width}} {group:<{group_width}} {row['questions']:>4}  "
                    + "  ".join(f"{row[column]:>9.1f}" for column in COLUMNS)
                )
        latency = mode["latency_ms"]
        print(f"{name:<{mode_width}} latency p50 {latency['p50']} ms, p95 {latency['p95']} ms")
    print("time: " + ", ".join(f"{name} {s} s" for name, s in report["timings_s"].items()))


def evaluation_run(args: argparse.Namespace) -> dict[str, Any]:
    """Evaluate every mode of --modes and plain BM25, print the table and write --json;
    Django set up."""
    clock = Clock()
    with clock.phase("read"):
        dataset = dataset_load(args)
    with evaluation_project(args, dataset, clock) as project:
        reports = rankings_evaluate(project, dataset, args.modes, clock)
    report = {
        "dataset": dataset.name,
        "description": dataset.description,
        "source": str(args.path),
        "conversations": len(dataset.dialogues),
        "turns": dataset.turns,
        "questions": dataset.questions,
        "skipped": dataset.skipped,
        "order": dataset.order,
        "settings": args.settings,
        "timings_s": clock.seconds,
        "modes": reports,
    }
    table_print(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


def main(argv: list[str] | None = None) -> int:
    return evaluation_main(argv, arguments, evaluation_run)


if __name__ == "__main__":
    sys.exit(main())
