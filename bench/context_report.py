"""What bench/context_eval.py prints and judges, without Django: the table per budget
(bench/context_scoring.budget_table), where in the context its finds lie (per section),
BEAM's changed values and contradictions (bench/context_beam.sides_table), and the
verdict against the baselines."""

from __future__ import annotations

from typing import Any

from bench.context_scoring import METHOD_TITLES, METHODS
from bench.evaluate import report_header_print

# the context's sections in the order it fills them (memories/services/context/fitting.py)
SECTIONS = ("synopsis", "facts", "working", "history", "retrieved")
EVIDENCE_MARGIN = 2.0  # points the context may trail the search baseline on evidence
# BEAM's measures of the sides of a question (bench/context_beam.sides_table), as printed
SIDE_TITLES = {
    "newest_present": "newest value present",
    "old_alone": "old value alone",
    "both_present": "both statements present",
}


def _cell(value: float | None) -> str:
    return f"{value:>10.1f}" if value is not None else f"{'-':>10}"


def table_lines(budget: dict[str, Any]) -> list[str]:
    """One budget's report as text: a row per category, the two metrics side by side."""
    titles = [METHOD_TITLES[m] for m in METHODS]
    width = max(len("category"), *(len(group) for group in budget["groups"]))
    tokens = budget["tokens_mean"]
    lines = [
        f"budget {budget['budget']} tokens, {budget['questions']} questions; mean tokens: "
        + ", ".join(f"{METHOD_TITLES[m]} {tokens[m]}" for m in METHODS),
        f"{'':<{width}} {'':>4} {'':>4}  {'evidence recall (%)':^32}  "
        f"{'answer containment (%)':^32}",
        f"{'category':<{width}} {'n':>4} {'ans':>4}  "
        + " ".join(f"{t:>10}" for t in titles) + "  " + " ".join(f"{t:>10}" for t in titles),
    ]  # fmt: skip
    for group, row in budget["groups"].items():
        answerable = row["answerable"]
        lines.append(
            f"{group:<{width}} {row['questions']:>4} "
            + (f"{answerable:>4}" if answerable is not None else f"{'':>4}")
            + "  "
            + " ".join(_cell(row["evidence_recall"][m]) for m in METHODS)
            + "  "
            + " ".join(_cell(row["answer_containment"][m]) for m in METHODS)
        )
    return lines


def sections_summary(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per section over a budget's questions: mean tokens (0 where empty), the answers
    it holds (and holds alone), the evidence turns it holds."""
    seen = {name for question in found for name in question}
    names = [name for name in SECTIONS if name in seen] + sorted(seen - set(SECTIONS))
    summary = {}
    for name in names:
        summary[name] = {
            "tokens_mean": round(
                sum(q[name]["tokens"] for q in found if name in q) / max(len(found), 1), 1
            ),
            "answers": sum(1 for q in found if name in q and q[name]["answer"]),
            "answers_only_here": sum(
                1
                for q in found
                if name in q
                and q[name]["answer"]
                and not any(s["answer"] for other, s in q.items() if other != name)
            ),
            "evidence_turns": sum(len(q[name]["evidence"]) for q in found if name in q),
        }
    return summary


def verdict(budgets: list[dict[str, Any]], answers_row: str) -> dict[str, Any]:
    """Per budget: the context's answer containment (in ``answers_row``: LoCoMo's
    categories 1-4, BEAM's short answers) against both baselines, and its evidence
    recall (all questions) against the search baseline."""
    result: dict[str, Any] = {}
    for budget in budgets:
        answers = budget["groups"].get(answers_row, {}).get("answer_containment", {})
        evidence = budget["groups"]["all"]["evidence_recall"]
        margins = {
            "answers_vs_last_turns": _difference(answers, "last_turns"),
            "answers_vs_search": _difference(answers, "search"),
            "evidence_vs_search": _difference(evidence, "search"),
        }
        result[str(budget["budget"])] = {
            **margins,
            "beats_both_on_answers": all(
                (margins[key] or 0) > 0 for key in ("answers_vs_last_turns", "answers_vs_search")
            ),
            "evidence_within_margin": (margins["evidence_vs_search"] or 0) >= -EVIDENCE_MARGIN,
        }
    return result


def _difference(row: dict[str, float | None], baseline: str) -> float | None:
    context, other = row.get("context"), row.get(baseline)
    return None if context is None or other is None else round(context - other, 1)


def sides_lines(sides: dict[str, dict[str, Any]]) -> list[str]:
    """BEAM's measures of a question's sides, a row per measure, a column per method."""
    if not sides:
        return []
    titles = [METHOD_TITLES[m] for m in METHODS]
    width = max(len(title) for title in SIDE_TITLES.values())
    lines = [f"{'(% of questions)':<{width}} {'n':>4}  " + " ".join(f"{t:>10}" for t in titles)]
    for row in sides.values():
        for measure, title in SIDE_TITLES.items():
            if measure in row:
                lines.append(
                    f"{title:<{width}} {row['questions']:>4}  "
                    + " ".join(_cell(row[measure][m]) for m in METHODS)
                )
    return lines


# --- the report -----------------------------------------------------------------------


def report_print(report: dict[str, Any]) -> None:
    """The report as text: what the workers produced, then a table per budget."""
    report_header_print(report)
    if report.get("answers_note"):
        print(report["answers_note"])
    workers = report["workers"]
    synopses = (
        "none (no synopsis generation)" if workers["synopses"] is None else workers["synopses"]
    )
    print(
        f"workers: {workers['summaries']} summaries ({workers['rooms_summarized']} rooms over "
        f"capacity, {workers['messages_archived']} messages archived), facts "
        + ", ".join(f"{kind} {n}" for kind, n in workers["facts"].items())
        + f" ({workers['facts_superseded']} superseded; messages mined "
        + ", ".join(f"{status} {n}" for status, n in workers["messages_mined"].items())
        + f"), synopses {synopses}"
    )
    for budget in report["budgets"]:
        print()
        print("\n".join(budget_lines(budget, report["verdict"], report["answers_row"])))
    print("time: " + ", ".join(f"{name} {s} s" for name, s in report["timings_s"].items()))


def budget_lines(budget: dict[str, Any], judged: dict[str, Any], answers_row: str) -> list[str]:
    """One budget's table, BEAM's sides, the context's sections and the verdict."""
    verdict = judged[str(budget["budget"])]
    return [
        *table_lines(budget),
        *sides_lines(budget.get("sides", {})),
        "context sections (mean tokens; answers held, alone; evidence turns): "
        + "; ".join(
            f"{name} {s['tokens_mean']}, {s['answers']}, {s['answers_only_here']}, "
            f"{s['evidence_turns']}"
            for name, s in budget["context_sections"].items()
        ),
        f"context - last turns on answers ({answers_row}): "
        f"{_signed(verdict['answers_vs_last_turns'])} points, - search: "
        f"{_signed(verdict['answers_vs_search'])} points; evidence recall (all) - search: "
        f"{_signed(verdict['evidence_vs_search'])} points",
    ]


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+}"
