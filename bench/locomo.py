#!/usr/bin/env python
"""Retrieval quality on LoCoMo-format conversations (Maharana et al., 2024).

    .venv/bin/python bench/locomo.py ../shared/data/locomo-dev.json
    .venv/bin/python bench/locomo.py FILE.json --modes auto,keyword --json OUT.json
    .venv/bin/python bench/locomo.py FILE.json --set search.neighbour_weight=0
    .venv/bin/python bench/locomo.py FILE.json --keep          # keep the loaded project
    .venv/bin/python bench/locomo.py FILE.json --project NAME  # evaluate a kept one

Each conversation becomes one end user; every turn a message in a room per session,
with the session date in its metadata and as its time. Every question is then searched
through the same service the search API calls, and the evidence turns found in the
top k give recall@k (share of a question's evidence found) and hit@k (any found).
``--set`` (repeatable) gives the evaluation project search settings of its own
(memories.config), to try a ranking weight without touching the defaults.

Runs on the database the hub uses: the embedded PostgreSQL of the data folder
(MEMORYHUB_DATA_DIR, default var/), started or attached to, unless DATABASE_URL is
set. The LoCoMo file (CC BY-NC 4.0) is read where it lies, never copied into the
repository. The loader and the scoring need only the standard library
(bench/compare_mem0.py reads the file with them); Django is imported when the
evaluation runs.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memories.config import SEARCH_MODES, SettingsError, settings_validate  # noqa: E402

if TYPE_CHECKING:
    from memories.models import Project

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
KS = (5, 10, 20)
ORDER = ["all", "cat1-4", *CATEGORIES.values()]
COLUMNS = ["recall@5", "recall@10", "recall@20", "hit@10"]
WRITE_CHUNK = 500


# --- the data set ---------------------------------------------------------------------


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int
    date: datetime
    caption: str = ""

    @property
    def content(self) -> str:
        content = f"{self.speaker}: {self.text}"
        if self.caption:
            content += f" [shares a photo of {self.caption}]"
        return content


@dataclass
class Question:
    text: str
    category: int
    evidence: set[str]


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question] = field(default_factory=list)


def _parse_date(text: str) -> datetime:
    """LoCoMo session dates look like '1:56 pm on 8 May, 2023'."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _evidence_ids(raw: Iterable[str]) -> set[str]:
    """Evidence ids, tolerating 'D8:6; D9:17' and 'D30:05' as the data set has them."""
    ids = set()
    for item in raw:
        for part in str(item).split(";"):
            part = part.strip()
            if ":" in part:
                session, turn = part.split(":", 1)
                ids.add(
                    f"{session.strip()}:{int(turn) if turn.strip().isdigit() else turn.strip()}"
                )
    return ids


def _turns(raw: dict[str, Any]) -> list[Turn]:
    """Every session's turns in session order; a session's turns a second apart from its
    date, so their order survives sorting by time."""
    sessions = sorted(
        int(key.split("_")[1]) for key in raw if key.startswith("session_") and key.count("_") == 1
    )
    turns = []
    for number in sessions:
        date = _parse_date(raw[f"session_{number}_date_time"])
        for position, turn in enumerate(raw[f"session_{number}"]):
            turns.append(
                Turn(
                    dia_id=turn["dia_id"],
                    speaker=turn["speaker"],
                    text=turn["text"],
                    session=number,
                    date=date + timedelta(seconds=position),
                    caption=turn.get("blip_caption", ""),
                )
            )
    return turns


def locomo_load(path: Path) -> list[Conversation]:
    """Conversations with their turns and the questions that have evidence among them."""
    conversations = []
    for sample in json.loads(Path(path).read_text()):
        turns = _turns(sample["conversation"])
        known = {turn.dia_id for turn in turns}
        questions = []
        for qa in sample.get("qa", []):
            evidence = _evidence_ids(qa.get("evidence", [])) & known
            if evidence:
                questions.append(Question(qa["question"], int(qa["category"]), evidence))
        conversations.append(Conversation(sample["sample_id"], turns, questions))
    return conversations


def recall_scores(
    ranked: Iterable[tuple[Question, Sequence[str | None]]], ks: Sequence[int] = KS
) -> dict[str, dict[str, Any]]:
    """recall@k and hit@k in percent for each k, per category, over all questions and
    over categories 1-4 (the adversarial category left out), from each question's
    ranked dia_ids."""
    buckets: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for question, dia_ids in ranked:
        for k in ks:
            found = question.evidence & set(dia_ids[:k])
            for bucket in (CATEGORIES[question.category], "all", "cat1-4"):
                if bucket == "cat1-4" and question.category == 5:
                    continue
                buckets[bucket][f"recall@{k}"].append(len(found) / len(question.evidence))
                buckets[bucket][f"hit@{k}"].append(1.0 if found else 0.0)
    return {
        bucket: {
            "questions": len(metrics[f"recall@{ks[0]}"]),
            **{name: round(100 * statistics.fmean(values), 1) for name, values in metrics.items()},
        }
        for bucket, metrics in buckets.items()
    }


# --- the evaluation (Django) ----------------------------------------------------------


def locomo_ingest(
    *,
    project: Project,
    conversations: list[Conversation],
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write every turn as a message memory (through the normal write service)."""
    from memories.services.memories import MemoryInput, memory_create_batch
    from memories.services.revisions import Actor

    actor = Actor.system("locomo")
    written = 0
    for conversation in conversations:
        items = [
            MemoryInput(
                content=turn.content,
                user=conversation.sample_id,
                room=f"{conversation.sample_id}-session-{turn.session}",
                role="user",
                metadata={
                    "dia_id": turn.dia_id,
                    "speaker": turn.speaker,
                    "session": turn.session,
                    "session_date": turn.date.date().isoformat(),
                },
                created_at=turn.date,
            )
            for turn in conversation.turns
        ]
        for start in range(0, len(items), WRITE_CHUNK):
            chunk = items[start : start + WRITE_CHUNK]
            memory_create_batch(project=project, items=chunk, actor=actor)
            written += len(chunk)
            if progress:
                progress(len(chunk))
    return written


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def locomo_evaluate(
    *,
    project: Project,
    conversations: list[Conversation],
    mode: str,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Recall@k and hit@k per category and overall, and search latency, for one mode."""
    from memories.models import EndUser
    from memories.services.search import SearchFilters, memory_search

    users = dict(EndUser.objects.filter(project=project).values_list("external_id", "pk"))
    ranked: list[tuple[Question, list[str | None]]] = []
    latencies = []
    for conversation in conversations:
        filters = SearchFilters(end_user_id=users[conversation.sample_id])
        for question in conversation.questions:
            started = time.perf_counter()
            result = memory_search(
                project=project, query=question.text, mode=mode, filters=filters, k=max(KS)
            )
            latencies.append((time.perf_counter() - started) * 1000)
            ranked.append((question, [hit.memory.metadata.get("dia_id") for hit in result.hits]))
            if progress:
                progress(1)
    return {
        "mode": mode,
        "categories": recall_scores(ranked),
        "latency_ms": {
            "p50": round(_percentile(latencies, 0.5), 2),
            "p95": round(_percentile(latencies, 0.95), 2),
        },
    }


# --- the command line -----------------------------------------------------------------


class EvaluationError(Exception):
    """A reason the evaluation cannot run, for the user."""


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


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed command line; exits naming the problem before anything starts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="e.g. ../shared/data/locomo-dev.json")
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
    args = parser.parse_args(argv)
    if not args.path.exists():
        parser.error(f"{args.path} does not exist")
    args.modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = set(args.modes) - set(SEARCH_MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; choose from {list(SEARCH_MODES)}")
    try:
        args.settings = settings_parse(args.settings)
    except SettingsError as error:
        parser.error(f"--set: {error}")
    return args


def django_start() -> None:
    """Django on the hub's database, migrated (a fresh data folder works too)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from memoryhub import embedded

    embedded.services_start()
    call_command("migrate", interactive=False, verbosity=0)


def project_load(conversations: list[Conversation], overrides: dict[str, Any]) -> Project:
    """A new project with every turn written and embedded, its settings ``overrides``."""
    from tqdm import tqdm

    from memories.models import Project
    from memories.services.embedding import embedding_pending_count, embedding_run

    project = Project.objects.create(name=f"locomo-eval-{secrets.token_hex(4)}", settings=overrides)
    turns = sum(len(c.turns) for c in conversations)
    with tqdm(total=turns, desc="write", unit="turn", disable=None) as bar:
        locomo_ingest(project=project, conversations=conversations, progress=bar.update)
    with tqdm(total=embedding_pending_count(), desc="embed", unit="turn", disable=None) as bar:
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
    actor = Actor.system("locomo")
    project_settings_update(project=project, changes=overrides, actor=actor)
    try:
        yield
    finally:
        project_settings_update(project=project, changes=before, actor=actor, replace=True)


@contextmanager
def evaluation_project(
    args: argparse.Namespace, conversations: list[Conversation]
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
    project = project_load(conversations, args.settings)
    try:
        yield project
    finally:
        if not args.keep:
            project.delete()


def table_print(reports: list[dict[str, Any]]) -> None:
    print(f"{'mode':<10} {'questions':<22} {'n':>4}  " + "  ".join(f"{c:>9}" for c in COLUMNS))
    for report in reports:
        for bucket in ORDER:
            row = report["categories"].get(bucket)
            if row is None:
                continue
            print(
                f"{report['mode']:<10} {bucket:<22} {row['questions']:>4}  "
                + "  ".join(f"{row[name]:>9.1f}" for name in COLUMNS)
            )
        latency = report["latency_ms"]
        print(
            f"{report['mode']:<10} search latency p50 {latency['p50']} ms, p95 {latency['p95']} ms"
        )


def evaluation_run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Evaluate every mode of --modes, print the table and write --json; Django set up."""
    from tqdm import tqdm

    conversations = locomo_load(args.path)
    questions = sum(len(c.questions) for c in conversations)
    reports = []
    with evaluation_project(args, conversations) as project:
        for mode in args.modes:
            with tqdm(total=questions, desc=mode, unit="q", disable=None) as bar:
                reports.append(
                    locomo_evaluate(
                        project=project, conversations=conversations, mode=mode,
                        progress=bar.update,
                    )
                )  # fmt: skip
    if args.settings:
        print(f"project settings: {json.dumps(args.settings)}")
    table_print(reports)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=2))
    return reports


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    django_start()
    try:
        evaluation_run(args)
    except EvaluationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
