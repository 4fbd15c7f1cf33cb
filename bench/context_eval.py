#!/usr/bin/env python
"""Context quality on LoCoMo and BEAM: what the context endpoint puts in a prompt, beside
what an agent without memory (the last turns) and one with search alone (the top
results) would send within the same budget.

    .venv/bin/python bench/context_eval.py ../shared/data/locomo-dev.json
    .venv/bin/python bench/context_eval.py ../beam --size 100K --conversations 11-20
    .venv/bin/python bench/context_eval.py PATH --budgets 1000,2000 --json OUT.json
    .venv/bin/python bench/context_eval.py LOCOMO.json --conversations 1-2  # or conv-26
    .venv/bin/python bench/context_eval.py PATH --set context.history_share=0.3
    .venv/bin/python bench/context_eval.py PATH --keep          # keep the loaded project
    .venv/bin/python bench/context_eval.py PATH --project NAME  # evaluate a kept one

PATH says the format, as for bench/evaluate.py: a LoCoMo .json file (--conversations:
positions in the file or sample ids), or a BEAM folder (bench/context_beam.py: the
folder holding chats/, a chats/<size> folder, --size picking one of several, or one
conversation's folder; --conversations: their numbers, 11-20 or 11,12,15). Each
conversation is loaded as bench/evaluate.py loads it: one end user per conversation, a
room per session (LoCoMo) or batch (BEAM), each turn a message at its session's date, a
second apart, written through the normal write service and embedded. LoCoMo's two
speakers are both people whose memories matter, so both write as role "user", the
speaker's name in the metadata and, as in bench/evaluate.py, in the text ("Caroline:
..."), which search needs to tell the two apart; facts mined from either speaker's
turns belong to the one user. BEAM's turns keep their roles (user, assistant).

Then what the workers do after such writes is done here with their services, until
nothing is left (workers_finish): embedding, summaries of the rooms over their buffer
capacity, facts mined from every user message, the synopsis of each user, and the
embedding of what those wrote.

For every question with evidence among the turns and every budget, three texts, each
asked when the conversation is over (``now``: its last turn's time, against which a
time the question names, "last year", is read, as bench/rankings.py asks its searches):

* context: ``context_build`` (the service behind POST /api/v1/context/) with the
  question as ``query`` and ``max_tokens`` the budget; a LoCoMo question with no room
  (it is about the whole conversation, asked after it: the last session's room would
  add that session's last turns as the conversation under way), a BEAM question in the
  room of the conversation's last batch (the session under way when it is asked);
* last turns: the conversation's newest turns, rendered as the context renders its
  history ("[date time] speaker: text"), as many as fit;
* search: the top results of the default search (auto mode) among the user's
  memories, rendered with their dates as the context renders retrieved memories, each
  added in rank order if it still fits; k is large enough never to run out (a line
  costs at least 10 tokens).

All three are counted with the same token counter (memories.providers.tokens,
cl100k_base) and scored (bench/context_scoring.py) for evidence recall (the share of the
evidence turns whose whole text appears) and answer containment (the gold answer appears
as whole words once both are normalized, dates in any format written alike; LoCoMo's
categories 1-4, BEAM's short answers), per LoCoMo category or BEAM question type; for
BEAM also, per method, the knowledge updates whose newest value is present, those whose
old value is present alone, and the contradictions with both statements present
(bench/context_beam.py). --json writes {"dataset", "description", "source",
"conversations", "turns", "questions", "skipped", "settings", "workers", "answers_row",
"answers_note", "budgets": [{"budget", "questions", "tokens_mean": {method}, "groups":
{row: {"questions", "answerable", "evidence_recall": {method}, "answer_containment":
{method}}}, "sides": {question type: {"questions", measure: {method}}} (BEAM),
"context_sections": {section: {"tokens_mean", "answers", "answers_only_here",
"evidence_turns"}}}], "verdict", "methods", "timings_s"}; methods are "context",
"last_turns", "search".

Runs on the database the hub uses (the embedded PostgreSQL and Redis of the data folder,
MEMORYHUB_DATA_DIR, default var/), as bench/evaluate.py does. The data sets are read
where they lie, never copied into the repository: LoCoMo is CC BY-NC 4.0; BEAM has no
licence (fetch it yourself: github mohammadtavakoli78/BEAM).
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

from bench.beam import BeamError, beam_folders, conversations_parse  # noqa: E402
from bench.context_beam import ANSWERS_NOTE, beam_read, sides_table  # noqa: E402
from bench.context_report import report_print, sections_summary, verdict  # noqa: E402
from bench.context_scoring import (  # noqa: E402
    LOCOMO_LAYOUT,
    METHOD_TITLES,
    Layout,
    Question,
    Rendered,
    Score,
    SelectionError,
    budget_table,
    last_turns_fit,
    locomo_conversations,
    questions_load,
    ranked_fit,
    score,
    tokens_mean,
)
from bench.context_workers import workers_finish  # noqa: E402
from bench.dataset import Dataset  # noqa: E402
from bench.evaluate import (  # noqa: E402
    Clock,
    evaluation_project,
    progress_bar,
    settings_parse,
)
from bench.evaluation_command import evaluation_main  # noqa: E402
from bench.locomo import locomo_dataset  # noqa: E402
from bench.rankings import EvaluationError, project_users  # noqa: E402
from memories.config import SettingsError  # noqa: E402
from memories.providers.tokens import token_count  # noqa: E402

if TYPE_CHECKING:
    from memories.models import EndUser, Project, Room

DEFAULT_BUDGETS = "1000,2000"
MIN_LINE_TOKENS = 10  # "[2023-05-08] A: " and a word or two: the search baseline's k


# --- the data set ---------------------------------------------------------------------


def dataset_read(args: argparse.Namespace) -> tuple[Dataset, list[Question], Layout]:
    """The chosen conversations as bench/evaluate.py writes them, their questions and
    the table's rows: PATH's format says how (a file is LoCoMo, a folder BEAM)."""
    if args.path.is_dir():
        try:
            return beam_read(args.path, size=args.size, only=args.conversations)
        except BeamError as error:
            raise EvaluationError(str(error)) from error
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
    return dataset, questions_load(args.path, conversations), LOCOMO_LAYOUT


# --- the three texts per question ----------------------------------------------------


class ConversationTexts:
    """One end user's texts: the last turns per budget (the same for all its
    questions), the search baseline and the context per question, each asked at the
    conversation's last turn's time."""

    def __init__(self, *, project: Project, end_user: EndUser, budgets: list[int]) -> None:
        from memories.models import Memory
        from memories.services.context.sources import turn_line

        self.project, self.end_user = project, end_user
        self.search_k = max(1, max(budgets) // MIN_LINE_TOKENS)
        messages = list(
            Memory.objects.with_external_ids()
            .filter(project=project, end_user=end_user, kind=Memory.Kind.MESSAGE)
            .order_by("created_at", "id")
        )
        self.asked = messages[-1].created_at if messages else None
        lines = [turn_line(message) for message in messages]
        self.last_turns = {budget: last_turns_fit(lines, budget) for budget in budgets}
        self.rooms: dict[str, Room] = {}

    def search_lines(self, query: str) -> list[str]:
        from memories.services.context.sources import turn_line
        from memories.services.search import SearchFilters, memory_search

        result = memory_search(
            project=self.project, query=query, mode="auto",
            filters=SearchFilters(end_user_id=self.end_user.pk), k=self.search_k,
            now=self.asked,
        )  # fmt: skip
        return [turn_line(hit.memory, with_time=False) for hit in result.hits]

    def room(self, external_id: str | None) -> Room | None:
        """The user's room of that external id (None: no room)."""
        from memories.models import Room

        if external_id is None:
            return None
        if external_id not in self.rooms:
            found = Room.objects.filter(project=self.project, external_id=external_id).first()
            if found is None:
                raise EvaluationError(f"project {self.project.name!r} has no room {external_id!r}")
            self.rooms[external_id] = found
        return self.rooms[external_id]

    def context(self, question: Question, budget: int) -> Any:
        from memories.services.context import context_build

        return context_build(
            end_user=self.end_user, room=self.room(question.room), query=question.text,
            max_tokens=budget, now=self.asked,
        )  # fmt: skip


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
            result = conversation.context(question, budget)
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


def budgets_report(
    questions: list[Question], layout: Layout, budgets: list[int],
    scores: dict[int, list[dict[str, Score]]], found: dict[int, list[dict[str, Any]]],
) -> list[dict[str, Any]]:  # fmt: skip
    """Per budget: the mean tokens, the table, BEAM's sides, the context's sections."""
    reports = []
    for budget in budgets:
        report: dict[str, Any] = {
            "budget": budget,
            "questions": len(questions),
            "tokens_mean": tokens_mean(scores[budget]),
            "groups": budget_table(questions, scores[budget], layout),
        }
        sides = sides_table(questions, scores[budget])
        if sides:
            report["sides"] = sides
        report["context_sections"] = sections_summary(found[budget])
        reports.append(report)
    return reports


def evaluation_run(args: argparse.Namespace) -> dict[str, Any]:
    """Load, let the workers finish, score every question at every budget, print the
    tables and write --json; Django set up."""
    clock = Clock()
    with clock.phase("read"):
        dataset, questions, layout = dataset_read(args)
    with evaluation_project(args, dataset, clock) as project:
        with clock.phase("workers"):
            workers = workers_finish(project=project)
        with clock.phase("questions"), progress_bar(len(questions), "questions", "q") as bar:
            scores, found = questions_score(
                project=project, dataset=dataset, questions=questions, budgets=args.budgets,
                progress=bar.update,
            )  # fmt: skip
    budgets = budgets_report(questions, layout, args.budgets, scores, found)
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
        "answers_row": layout.answers_row,
        "answers_note": ANSWERS_NOTE if args.path.is_dir() else None,
        "budgets": budgets,
        "verdict": verdict(budgets, layout.answers_row),
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
    parser.add_argument(
        "path", type=Path, help="a LoCoMo .json file or a BEAM folder, e.g. ../beam"
    )
    parser.add_argument("--budgets", default=DEFAULT_BUDGETS, help="comma-separated token budgets")
    parser.add_argument("--size", help="BEAM: the chats/ size folder, e.g. 100K")
    parser.add_argument(
        "--conversations",
        help="LoCoMo: positions in the file (1-2, 1,3) or sample ids (conv-26); "
        "BEAM: conversation numbers (11-20, 11,12)",
    )
    parser.add_argument("--project", help="evaluate an already loaded project (else a new one)")
    parser.add_argument("--keep", action="store_true", help="keep the loaded project")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    parser.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="SECTION.NAME=VALUE",
        help="a setting of the evaluated project, e.g. context.history_share=0.3 (repeatable)",
    )  # fmt: skip
    return parser


def _selection_check(args: argparse.Namespace) -> None:
    """--size and --conversations parsed and checked against PATH."""
    if args.path.is_dir():
        if args.conversations is not None:
            args.conversations = conversations_parse(args.conversations)
        beam_folders(args.path, size=args.size, only=args.conversations)
        return
    if args.size:
        raise SelectionError("--size picks BEAM conversations, not LoCoMo")
    locomo_conversations(args.path, args.conversations)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed command line; exits naming the problem before anything starts."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.path.is_file() and not args.path.is_dir():
        parser.error(f"{args.path} is neither a LoCoMo .json file nor a BEAM folder")
    try:
        args.budgets = sorted({int(part) for part in args.budgets.split(",") if part.strip()})
    except ValueError:
        parser.error(f"--budgets: {args.budgets!r} is not like 1000,2000")
    if not args.budgets or min(args.budgets) < 1:
        parser.error("--budgets: give one or more positive token counts, e.g. 1000,2000")
    try:
        _selection_check(args)
        args.settings = settings_parse(args.settings)
    except (SelectionError, BeamError) as error:
        parser.error(str(error))
    except SettingsError as error:
        parser.error(f"--set: {error}")
    return args


def main(argv: list[str] | None = None) -> int:
    return evaluation_main(argv, arguments, evaluation_run)


if __name__ == "__main__":
    sys.exit(main())
