"""Fitting a context to its budget: de-duplication across sections, per-section
budgets whose unused tokens flow to the next section, rendering, and the final
re-count that guarantees the rendered text is within the budget."""

from __future__ import annotations

from dataclasses import dataclass, field

from memories.providers.tokens import token_count
from memories.services.context.sources import Candidate

# the order sections are filled in (and unused budget flows), and their headings
SECTIONS = ("synopsis", "facts", "working", "history", "retrieved")
HEADINGS = {
    "synopsis": "## About the user",
    "facts": "## Facts about the user",
    "working": "## Working notes",
    "history": "## The conversation so far",
    "retrieved": "## Related memories",
}
# a memory in several sections stays in the most valuable one
PRECEDENCE = ("synopsis", "facts", "history", "working", "retrieved")


@dataclass
class Section:
    name: str
    budget: int
    items: list[Candidate] = field(default_factory=list)
    dropped: list[tuple[Candidate, str]] = field(default_factory=list)
    tokens: int = 0


def budgets_split(
    max_tokens: int, *, history: float, retrieved: float, shares: dict[str, float] | None = None
) -> dict[str, int]:
    """Each section's budget: ``shares`` when given (fractions of max_tokens), else the
    history and retrieved shares and the rest split evenly between synopsis, facts and
    working memory."""
    if shares is None:
        rest = max(0.0, 1.0 - history - retrieved) / 3
        shares = {
            "synopsis": rest,
            "facts": rest,
            "working": rest,
            "history": history,
            "retrieved": retrieved,
        }
    return {name: int(max_tokens * shares.get(name, 0.0)) for name in SECTIONS}


def deduplicate(candidates: list[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """Each memory (same key) and each near-identical text (same words) once, in its
    most valuable section; returns (kept, duplicates)."""
    order = sorted(candidates, key=lambda c: (PRECEDENCE.index(c.section), -c.score))
    seen_keys: set[str] = set()
    seen_texts: set[str] = set()
    kept, duplicates = [], []
    for candidate in order:
        norm = candidate.norm
        if candidate.key in seen_keys or (norm and norm in seen_texts):
            duplicates.append(candidate)
            continue
        seen_keys.add(candidate.key)
        if norm:
            seen_texts.add(norm)
        kept.append(candidate)
    return kept, duplicates


def sections_fill(
    candidates: list[Candidate], budgets: dict[str, int], encoding: str
) -> list[Section]:
    """Each section takes its best candidates while they fit its budget plus what the
    sections before it left unused."""
    sections, carry = [], 0
    for name in SECTIONS:
        section = Section(name, budgets[name] + carry)
        mine = sorted((c for c in candidates if c.section == name), key=lambda c: -c.score)
        heading = token_count(HEADINGS[name] + "\n", encoding)
        groups: set[str] = set()
        for candidate in mine:
            candidate.tokens = token_count(candidate.text + "\n", encoding)
            cost = candidate.tokens + (0 if section.items else heading)
            if candidate.group and candidate.group not in groups:
                cost += token_count(candidate.group + "\n", encoding)
            if section.tokens + cost <= section.budget:
                section.items.append(candidate)
                section.tokens += cost
                groups.add(candidate.group)
            else:
                section.dropped.append((candidate, "over the section's budget"))
        carry = section.budget - section.tokens
        sections.append(section)
    return sections


def render(sections: list[Section]) -> str:
    """The prompt text: each non-empty section under its heading; history and
    retrieved memories in time order (the retrieved ones under a line per day), the rest
    best first."""
    blocks = []
    for section in sections:
        if not section.items:
            continue
        items = section.items
        if section.name in ("history", "retrieved"):
            items = sorted(items, key=lambda c: (c.created_at is None, c.created_at))
            if section.name == "history":  # the summary of older turns comes first
                items.sort(key=lambda c: c.kind != "summary")
        blocks.append("\n".join([HEADINGS[section.name], *_lines(items)]))
    return "\n\n".join(blocks)


def _lines(items: list[Candidate]) -> list[str]:
    """The items' lines, each group's header (a day) once before its first item."""
    lines, current = [], ""
    for item in items:
        if item.group and item.group != current:
            lines.append(item.group)
            current = item.group
        lines.append(item.text)
    return lines


def fit(sections: list[Section], max_tokens: int, encoding: str) -> tuple[str, int]:
    """The rendered text and its exact token count, within ``max_tokens``: while the
    re-counted text is over (the per-item counts are an estimate: tokens can merge
    across line breaks), the least valuable item of the last non-empty section goes."""
    while True:
        text = render(sections)
        total = token_count(text, encoding)
        if total <= max_tokens:
            return text, total
        for section in reversed(sections):
            if section.items:
                worst = min(section.items, key=lambda c: c.score)
                section.items.remove(worst)
                section.tokens -= worst.tokens
                section.dropped.append((worst, "over the budget once rendered"))
                break
        else:
            return "", 0
