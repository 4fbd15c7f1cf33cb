#!/usr/bin/env python
"""Context quality on LoCoMo: what the context endpoint puts in a prompt, beside what an
agent without memory (the last turns) and one with search alone (the top results) would
send within the same budget.

    .venv/bin/python bench/context_eval.py ../shared/data/locomo-dev.json
    .venv/bin/python bench/context_eval.py PATH --budgets 1000,2000 --json OUT.json
    .venv/bin/python bench/context_eval.py PATH --conversations 1-2   # or conv-26,conv-30
    .venv/bin/python bench/context_eval.py PATH --set context.history_share=0.3
    .venv/bin/python bench/context_eval.py PATH --keep          # keep the loaded project
    .venv/bin/python bench/context_eval.py PATH --project NAME  # evaluate a kept one

Each conversation is loaded as bench/evaluate.py loads it (bench/locomo.py: one end user
per conversation, a room per session, each turn a message at its session's date, a
second apart), written through the normal write service and embedded. Both speakers
are people whose memories matter, so both write as role "user", the speaker's name in
the metadata (the context renders it, the summarizer and the fact extractor read it)
and, as in bench/evaluate.py, in the text ("Caroline: ..."), which search needs to tell
the two apart. Facts are mined from both speakers' turns and all belong to the one
user (the offline extractor writes each as "User ..."): a question about either
speaker can be answered by a fact, not told whose it is.

Then what the workers do after such writes is done here with their services, until
nothing is left (workers_finish): embedding, summaries of the rooms over their buffer
capacity (LoCoMo's sessions hold 20-30 turns, under the default capacity of 100, so
usually none), facts mined from every user message, the synopsis of each user once the
synopsis app generates one, and the embedding of what those wrote.

For every question (those with evidence among the turns) and every budget, three texts:

* context: ``context_build`` (the service behind POST /api/v1/context/) with the
  question as ``query``, ``max_tokens`` the budget and no room: the questions are asked
  after the conversation, about all of it, not inside one of its sessions (the last
  session's room would add that session's last turns as the conversation under way);
* last turns: the conversation's newest turns, rendered as the context renders its
  history ("[date time] speaker: text"), as many as fit;
* search: the top results of the default search (auto mode) among the user's
  memories, rendered with their dates as the context renders retrieved memories, each
  added in rank order if it still fits; k is large enough never to run out (a line
  costs at least 10 tokens).

All three are counted with the same token counter (memories.providers.tokens, cl100k_base) and
scored (bench/context_scoring.py) for evidence recall (the share of the evidence turns
whose text appears) and answer containment (the normalized gold answer appears,
categories 1-4), per category. --json writes {"dataset", "source", "conversations",
"turns", "questions", "skipped", "settings", "workers", "budgets": [{"budget",
"questions", "tokens_mean": {method}, "groups": {row: {"questions", "answerable",
"evidence_recall": {method}, "answer_containment": {method}}}, "context_sections":
{section: {"tokens_mean", "answers", "answers_only_here", "evidence_turns"}}}],
"verdict", "timings_s"}; methods are "context", "last_turns", "search".

Runs on the database the hub uses (the embedded PostgreSQL and Redis of the data folder,
MEMORYHUB_DATA_DIR, default var/), as bench/evaluate.py does. The LoCoMo file (CC BY-NC
4.0) is read where it lies, never copied into the repository.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.context_scoring import (  # noqa: E402
    METHOD_TITLES,
    Question,
    Rendered,
    Score,
    SelectionError,
    budget_table,
    last_turns_fit,
    locomo_conversations,
    questions_load,
    ranked_fit,
    report_print,
    score,
    sections_summary,
    tokens_mean,
    verdict,
)
from bench.dataset import Dataset  # noqa: E402
from bench.evaluate import (  # noqa: E402
    Clock,
    evaluation_project,
    progress_bar,
    settings_parse,
)
from bench.evaluation_command import evaluation_main  # noqa: E402
from bench.locomo import locomo_dataset  # noqa: E402
from bench.rankings import project_users  # noqa: E402
from memories.config import SettingsError  # noqa: E402
from memories.providers.tokens import token_count  # noqa: E402

if TYPE_CHECKING:
    from memories.models import EndUser, Project

DEFAULT_BUDGETS = "1000,2000"
MIN_LINE_TOKENS = 10  # "[2023-05-08] A: " and a word or two: the search baseline's k
MINE_CHUNK = 200  # user messages mined between two embedding runs


# --- the data set ---------------------------------------------------------------------


def dataset_read(args: argparse.Namespace) -> tuple[Dataset, list[Question]]:
    """The chosen conversations as bench/evaluate.py writes them, and their questions."""
    conversations = locomo_conversations(args.path, args.conversations)
    chosen = {conversation.sample_id for conversation in conversations}
    full = locomo_dataset(args.path)
    skipped: dict[str, int] = defaultdict(int)
    for conversation in conversations:
        for group, count in conversation.skipped.items():
            skipped[group] += count
    dataset = Dataset(
        name=full.name,
        description=f"LoCoMo {args.path.name}, {len(conversations)} conversations",
        key_field=full.key_field,
        order=full.order,
        dialogues=[dialogue for dialogue in full.dialogues if dialogue.user in chosen],
        skipped=dict(skipped),
    )
    return dataset, questions_load(args.path, conversations)


# --- the workers' part ----------------------------------------------------------------


def workers_finish(*, project: Project) -> dict[str, Any]:
    """Do what the workers do after the writes, with their services, until nothing is
    left: embed, summarize the rooms over capacity, mine every user message for facts
    (embedding between chunks, as the worker's queues interleave), generate each user's
    synopsis (once the synopsis app does), embed what those wrote; returns what the
    project then holds."""
    from memories.models import Memory, Room
    from memories.services.buffer import rooms_over_capacity
    from memories.services.embedding import embedding_run
    from synopsis.services.facts import messages_facts_extract
    from synopsis.services.summaries import room_summarize

    embedding_run()
    room_ids = list(Room.objects.filter(project=project).values_list("pk", flat=True))
    over = rooms_over_capacity(project_id=project.pk, room_ids=room_ids)
    for room_id in over:
        room_summarize(room_id=room_id)
    embedding_run()
    unmined = list(
        Memory.objects.filter(
            project=project, kind=Memory.Kind.MESSAGE, role=Memory.Role.USER,
            end_user__isnull=False, fact_extraction__isnull=True,
        ).order_by("created_at", "id").values_list("pk", flat=True)
    )  # fmt: skip
    with progress_bar(len(unmined), "facts", "message") as bar:
        for start in range(0, len(unmined), MINE_CHUNK):
            messages_facts_extract(memory_ids=unmined[start : start + MINE_CHUNK])
            embedding_run()
            bar.update(len(unmined[start : start + MINE_CHUNK]))
    synopses = synopses_generate(project=project)
    embedding_run()
    return derived_counts(project=project, rooms_summarized=len(over), synopses=synopses)


def synopses_generate(*, project: Project) -> int | None:
    """Each user's synopsis by the synopsis app's generation service (what its worker
    task calls); None while the app has none."""
    try:
        from synopsis.services.synopses import synopsis_generate  # type: ignore[import-not-found]
    except ImportError:
        return None
    from memories.models import EndUser

    users = list(EndUser.objects.for_project(project).values_list("pk", flat=True))
    for user_id in users:
        synopsis_generate(end_user_id=user_id)
    return len(users)


def derived_counts(
    *, project: Project, rooms_summarized: int, synopses: int | None
) -> dict[str, Any]:
    """What the workers produced: summaries, facts by kind and status, mined messages,
    synopses (None: no synopsis generation in this checkout)."""
    from django.apps import apps
    from django.db.models import Count

    from memories.models import Memory
    from synopsis.models import FactExtraction

    memories = Memory.objects.filter(project=project)
    by_kind = {
        (row["kind"], row["status"]): row["n"]
        for row in memories.values("kind", "status").annotate(n=Count("id"))
    }
    mined = dict(
        FactExtraction.objects.filter(project=project)
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    try:
        synopsis_rows = apps.get_model("memories", "Synopsis").objects.filter(project=project)
        stored: int | None = synopsis_rows.count()
    except LookupError:
        stored = None
    return {
        "rooms_summarized": rooms_summarized,
        "summaries": sum(n for (kind, _), n in by_kind.items() if kind == "summary"),
        "messages_archived": by_kind.get(("message", "archived"), 0),
        "messages_mined": mined,
        "facts": {
            kind: by_kind.get((kind, "active"), 0) for kind in ("fact", "relationship", "goal")
        },
        "facts_superseded": sum(
            n
            for (kind, status), n in by_kind.items()
            if kind in ("fact", "relationship", "goal") and status == "superseded"
        ),  # fmt: skip
        "synopses_generated": synopses,
        "synopses": stored,
    }


# --- the three texts per question ----------------------------------------------------


class ConversationTexts:
    """One end user's texts: the last turns per budget (the same for all its
    questions), the search baseline and the context per question."""

    def __init__(self, *, project: Project, end_user: EndUser, budgets: list[int]) -> None:
        from memories.models import Memory
        from memories.services.context.sources import turn_line

        self.project, self.end_user = project, end_user
        self.search_k = max(1, max(budgets) // MIN_LINE_TOKENS)
        messages = (
            Memory.objects.with_external_ids()
            .filter(project=project, end_user=end_user, kind=Memory.Kind.MESSAGE)
            .order_by("created_at", "id")
        )
        lines = [turn_line(message) for message in messages]
        self.last_turns = {budget: last_turns_fit(lines, budget) for budget in budgets}

    def search_lines(self, query: str) -> list[str]:
        from memories.services.context.sources import turn_line
        from memories.services.search import SearchFilters, memory_search

        result = memory_search(
            project=self.project, query=query, mode="auto",
            filters=SearchFilters(end_user_id=self.end_user.pk), k=self.search_k,
        )  # fmt: skip
        return [turn_line(hit.memory, with_time=False) for hit in result.hits]

    def context(self, query: str, budget: int) -> Any:
        from memories.services.context import context_build

        return context_build(end_user=self.end_user, query=query, max_tokens=budget)


def sections_found(question: Question, result: Any) -> dict[str, dict[str, Any]]:
    """Per section of a context: its tokens, whether it holds the answer, and the
    evidence turns it holds (where the context finds what it finds)."""
    found = {}
    for section in result.sections:
        if not section.items:
            continue
        rendered = Rendered.of("\n".join(item.text for item in section.items))
        found[section.name] = {
            "tokens": section.tokens,
            "answer": question.answer is not None and rendered.has_answer(question.answer),
            "evidence": [d for d, text in question.evidence.items() if rendered.has_turn(text)],
        }
    return found


def questions_score(
    *, project: Project, dataset: Dataset, questions: list[Question], budgets: list[int],
    progress: Callable[[int], None] | None = None,
) -> tuple[dict[int, list[dict[str, Score]]], dict[int, list[dict[str, Any]]]]:  # fmt: skip
    """Each question's three texts scored at each budget, and where the context's finds
    lie (per budget, a list in question order)."""
    from memories.models import EndUser

    users = project_users(project, dataset)
    scores: dict[int, list[dict[str, Score]]] = {budget: [] for budget in budgets}
    sections: dict[int, list[dict[str, Any]]] = {budget: [] for budget in budgets}
    conversation = None
    for question in questions:
        if conversation is None or conversation.end_user.external_id != question.conversation:
            end_user = EndUser.objects.get(pk=users[question.conversation])
            conversation = ConversationTexts(project=project, end_user=end_user, budgets=budgets)
        searched = conversation.search_lines(question.text)
        for budget in budgets:
            result = conversation.context(question.text, budget)
            last = conversation.last_turns[budget]
            search = ranked_fit(searched, budget)
            scores[budget].append({
                "context": score(question, result.prompt, result.total_tokens),
                "last_turns": score(question, last, token_count(last)),
                "search": score(question, search, token_count(search)),
            })  # fmt: skip
            sections[budget].append(sections_found(question, result))
        if progress:
            progress(1)
    return scores, sections


# --- the evaluation -------------------------------------------------------------------


def evaluation_run(args: argparse.Namespace) -> dict[str, Any]:
    """Load, let the workers finish, score every question at every budget, print the
    tables and write --json; Django set up."""
    clock = Clock()
    with clock.phase("read"):
        dataset, questions = dataset_read(args)
    with evaluation_project(args, dataset, clock) as project:
        with clock.phase("workers"):
            workers = workers_finish(project=project)
        with clock.phase("questions"), progress_bar(len(questions), "questions", "q") as bar:
            scores, found = questions_score(
                project=project, dataset=dataset, questions=questions, budgets=args.budgets,
                progress=bar.update,
            )  # fmt: skip
    budgets = [
        {
            "budget": budget,
            "questions": len(questions),
            "tokens_mean": tokens_mean(scores[budget]),
            "groups": budget_table(questions, scores[budget]),
            "context_sections": sections_summary(found[budget]),
        }
        for budget in args.budgets
    ]
    report = {
        "dataset": dataset.name,
        "description": dataset.description,
        "source": str(args.path),
        "conversations": [dialogue.user for dialogue in dataset.dialogues],
        "turns": dataset.turns,
        "questions": len(questions),
        "skipped": dataset.skipped,
        "settings": args.settings,
        "workers": workers,
        "budgets": budgets,
        "verdict": verdict(budgets),
        "methods": METHOD_TITLES,
        "timings_s": clock.seconds,
    }
    report_print(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


# --- the command line -----------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a LoCoMo .json file")
    parser.add_argument("--budgets", default=DEFAULT_BUDGETS, help="comma-separated token budgets")
    parser.add_argument(
        "--conversations", help="positions in the file (1-2, 1,3) or sample ids (conv-26)"
    )
    parser.add_argument("--project", help="evaluate an already loaded project (else a new one)")
    parser.add_argument("--keep", action="store_true", help="keep the loaded project")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    parser.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="SECTION.NAME=VALUE",
        help="a setting of the evaluated project, e.g. context.history_share=0.3 (repeatable)",
    )  # fmt: skip
    return parser


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed command line; exits naming the problem before anything starts."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.path.is_file():
        parser.error(f"{args.path} is not a LoCoMo .json file")
    try:
        args.budgets = sorted({int(part) for part in args.budgets.split(",") if part.strip()})
    except ValueError:
        parser.error(f"--budgets: {args.budgets!r} is not like 1000,2000")
    if not args.budgets or min(args.budgets) < 1:
        parser.error("--budgets: give one or more positive token counts, e.g. 1000,2000")
    try:
        locomo_conversations(args.path, args.conversations)
        args.settings = settings_parse(args.settings)
    except SelectionError as error:
        parser.error(str(error))
    except SettingsError as error:
        parser.error(f"--set: {error}")
    return args


def main(argv: list[str] | None = None) -> int:
    return evaluation_main(argv, arguments, evaluation_run)


if __name__ == "__main__":
    sys.exit(main())
