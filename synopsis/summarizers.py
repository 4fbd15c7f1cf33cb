"""Summarizers: turn a batch of conversation turns and the room's previous summary into
the next summary of the chain, which alone accounts for everything summarized so far.

* ``LlmSummarizer``: asks the configured LLM (synopsis/llm.py) for a concise
  third-person summary.
* ``ExtractiveSummarizer``: offline; keeps the most central sentences (by the
  embedding model) within the token budget, each prefixed with its date and speaker.

``summary_draft`` picks the LLM when one is configured and falls back to the
extractive summary when the LLM refuses for good; a transient LLM failure propagates
(the caller retries later and loses nothing).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

from memories.providers.tokens import token_count, token_truncate
from memories.services import embedding as embedding_pipeline
from synopsis.llm import LlmError, LlmProvider, llm_choice

logger = logging.getLogger(__name__)

EXTRACTIVE = "extractive"
# the first line of an extractive summary, and the prefix of each of its other lines
HEADER = re.compile(r"^Conversation from (\S+) to (\S+): (.*)$")
LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2}\] [^:]+: (.+)$")
# after . ! ? or … (and closing quotes or brackets), or at a line break; tried where a
# whitespace run starts ("\s*\n" from inside a run of n spaces rescans it: n²)
SENTENCE_BREAK = re.compile(r"(?<=[.!?…])[\"')\]]*+\s+|(?<!\s)\s*\n\s*")
# a sentence longer than this is cut (with an ellipsis): one long turn must not be
# unaffordable as a whole and so vanish from the summary
SENTENCE_MAX_TOKENS = 80
# sentences of fewer words weigh less in the selection (greetings, "Yes please.")
SHORT_SENTENCE_WORDS = 8
# a candidate this similar to one already kept says nothing new
DUPLICATE_SIMILARITY = 0.95


@dataclass(frozen=True)
class Turn:
    id: str
    role: str
    content: str
    created_at: datetime
    speaker: str  # who said it, e.g. "Maria (user)" or "assistant"


@dataclass(frozen=True)
class SummaryDraft:
    text: str
    summarizer: str  # EXTRACTIVE or the LLM provider's name, e.g. "llm:gpt-4o-mini"
    token_count: int  # cl100k_base
    fallback_reason: str | None  # why the LLM's summary was not used, if it was asked
    usage: dict[str, int] | None  # the LLM's prompt_tokens and completion_tokens


class Summarizer(Protocol):
    name: str

    def draft(
        self,
        *,
        turns: Sequence[Turn],
        previous: str | None,
        max_tokens: int,
        project_id: int | None,
    ) -> SummaryDraft: ...


def summary_draft(
    *, turns: Sequence[Turn], previous: str | None, max_tokens: int, project_id: int | None = None
) -> SummaryDraft:
    """The next summary of the chain: ``previous`` folded together with ``turns``
    (oldest first) in at most ``max_tokens`` tokens; by the LLM if one is configured,
    extractive if not or if it fails for good. A retryable LlmError propagates."""
    if not turns:
        raise ValueError("no turns to summarize")
    if max_tokens <= 0:
        raise ValueError("max_tokens must be positive")
    provider, offline_reason = llm_choice(project_id=project_id)
    extractive = ExtractiveSummarizer()
    if provider is None:
        draft = extractive.draft(
            turns=turns, previous=previous, max_tokens=max_tokens, project_id=project_id
        )
        return replace(draft, fallback_reason=offline_reason or None)
    try:
        return LlmSummarizer(provider).draft(
            turns=turns, previous=previous, max_tokens=max_tokens, project_id=project_id
        )
    except LlmError as error:
        if error.retryable:
            raise
        reason = f"{error.kind}: {error}"
        logger.warning("%s failed for good (%s); summarizing extractively", provider.name, reason)
        draft = extractive.draft(
            turns=turns, previous=previous, max_tokens=max_tokens, project_id=project_id
        )
        return replace(draft, fallback_reason=reason)


# --- LLM ------------------------------------------------------------------------------

SYSTEM_PROMPT = (
    "You keep the running summary of a conversation for an AI agent's long-term memory. "
    "Write a concise summary in the third person. Keep who said what, using the "
    "speakers' names, and keep every name, number, date, place, preference, decision and "
    "plan. Fold the previous summary in: your summary replaces it and must alone account "
    "for the whole conversation so far. Leave out small talk. Plain sentences, no "
    "preamble, no headings, at most {max_tokens} tokens."
)


class LlmSummarizer:
    """A summary written by the configured LLM, cut to the budget if it runs over."""

    def __init__(self, provider: LlmProvider) -> None:
        self.provider = provider
        self.name = provider.name

    def draft(
        self,
        *,
        turns: Sequence[Turn],
        previous: str | None,
        max_tokens: int,
        project_id: int | None,
    ) -> SummaryDraft:
        transcript = "\n".join(
            f"[{_utc(turn.created_at):%Y-%m-%d %H:%M}] {turn.speaker}: {turn.content.strip()}"
            for turn in turns
        )
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT.format(max_tokens=max_tokens)},
            {
                "role": "user",
                "content": f"Previous summary:\n{(previous or '').strip() or '(none)'}\n\n"
                f"New messages, oldest first:\n{transcript}",
            },
        ]
        result = self.provider.chat(
            messages,
            purpose="summary",
            project_id=project_id,
            # some room above the budget: a summary that runs over is cut at a sentence
            # here rather than mid-word by the endpoint
            max_tokens=max_tokens + max_tokens // 4 + 16,
        )
        text = text_fit(result.text, max_tokens)
        usage = {
            name: value
            for name, value in (
                ("prompt_tokens", result.prompt_tokens),
                ("completion_tokens", result.completion_tokens),
            )
            if value is not None
        }
        return SummaryDraft(
            text=text,
            summarizer=self.name,
            token_count=token_count(text),
            fallback_reason=None,
            usage=usage or None,
        )


def text_fit(text: str, max_tokens: int) -> str:
    """``text`` within ``max_tokens``: cut at the last sentence end that fits, or at a
    token if that would lose more than half of it."""
    if token_count(text) <= max_tokens:
        return text
    cut = token_truncate(text, max_tokens)
    ends = [match.end() for match in re.finditer(r"[.!?…](?=\s|$)", cut)]
    if ends and ends[-1] >= len(cut) // 2:
        return cut[: ends[-1]]
    return cut.rstrip()


# --- Extractive -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    line: str  # as it appears in the summary
    text: str  # what is embedded: the sentence without its prefix


class ExtractiveSummarizer:
    """The most central sentences of the previous summary and the new turns (cosine to
    the centroid of their embeddings), in chronological order, within the budget."""

    name = EXTRACTIVE

    def draft(
        self,
        *,
        turns: Sequence[Turn],
        previous: str | None,
        max_tokens: int,
        project_id: int | None,
    ) -> SummaryDraft:
        carried, first_date, participants = _previous_parts(previous)
        dates = [_utc(turn.created_at).date().isoformat() for turn in turns]
        for turn in turns:
            if turn.speaker not in participants:
                participants.append(turn.speaker)
        first = min([first_date, *dates]) if first_date else min(dates)
        header = f"Conversation from {first} to {max(dates)}: {', '.join(participants)}"
        header = token_truncate(header, max_tokens)
        candidates = _unique(carried + [c for turn in turns for c in _turn_candidates(turn)])
        chosen = _select(header, candidates, max_tokens)
        text = "\n".join([header] + [candidates[i].line for i in chosen])
        return SummaryDraft(
            text=text,
            summarizer=self.name,
            token_count=token_count(text),
            fallback_reason=None,
            usage=None,
        )


def _previous_parts(previous: str | None) -> tuple[list[_Candidate], str | None, list[str]]:
    """The previous summary's lines as candidates (extractive lines keep their prefix;
    prose is split into sentences), and its first date and participants if its first
    line is an extractive header."""
    carried: list[_Candidate] = []
    first_date: str | None = None
    participants: list[str] = []
    for number, raw in enumerate((previous or "").splitlines()):
        line = raw.strip()
        header = HEADER.match(line) if number == 0 else None
        if header:
            first_date = header.group(1)
            participants = [name for name in header.group(3).split(", ") if name]
        elif match := LINE.match(line):
            carried.append(_Candidate(line=line, text=match.group(1)))
        else:
            carried.extend(_Candidate(line=s, text=s) for s in _sentences(line))
    return carried, first_date, participants


def _turn_candidates(turn: Turn) -> list[_Candidate]:
    prefix = f"[{_utc(turn.created_at).date().isoformat()}] {turn.speaker}: "
    return [_Candidate(line=prefix + s, text=s) for s in _sentences(turn.content)]


def _sentences(text: str) -> list[str]:
    """The sentences of ``text`` with their whitespace collapsed, long ones cut;
    fragments without a word (e.g. "...") are dropped."""
    sentences = []
    for part in SENTENCE_BREAK.split(text):
        sentence = " ".join(part.split())
        if not re.search(r"\w", sentence):
            continue
        if token_count(sentence) > SENTENCE_MAX_TOKENS:
            sentence = token_truncate(sentence, SENTENCE_MAX_TOKENS - 1).rstrip() + "…"
        sentences.append(sentence)
    return sentences


def _unique(candidates: list[_Candidate]) -> list[_Candidate]:
    seen: set[str] = set()
    unique = []
    for candidate in candidates:
        if candidate.line not in seen:
            seen.add(candidate.line)
            unique.append(candidate)
    return unique


def _select(header: str, candidates: list[_Candidate], max_tokens: int) -> list[int]:
    """Indexes of the candidates kept, in their (chronological) order: the most central
    first, each kept if the whole summary with it still fits ``max_tokens``."""
    if not candidates:
        return []
    provider = embedding_pipeline.get_provider()
    vectors = _unit(np.asarray(provider.embed([c.text for c in candidates]), dtype=np.float64))
    centroid = _unit(vectors.mean(axis=0, keepdims=True))[0]
    scores = (vectors @ centroid) * np.array([_informativeness(c.text) for c in candidates])
    ranked = sorted(range(len(candidates)), key=lambda i: (-round(float(scores[i]), 6), i))
    chosen: list[int] = []
    used = token_count(header)
    for index in ranked:
        # cheap bound first: lines joined by newlines cost about the sum of their parts
        if used + token_count(candidates[index].line) > max_tokens + 2:
            continue
        if chosen and float(np.max(vectors[chosen] @ vectors[index])) >= DUPLICATE_SIMILARITY:
            continue
        trial = sorted([*chosen, index])
        total = token_count("\n".join([header] + [candidates[i].line for i in trial]))
        if total <= max_tokens:
            chosen, used = trial, total
    return chosen


def _informativeness(sentence: str) -> float:
    """A weight on centrality: the centroid alone favours bland turns ("That sounds
    lovely.") over the facts a memory is for. Short sentences weigh less, names and
    numbers more."""
    words = re.findall(r"[^\W_]+", sentence)
    specifics = sum(1 for word in words if any(ch.isdigit() for ch in word))
    specifics += sum(1 for word in words[1:] if word[0].isupper() and word != "I")
    return min(1.0, len(words) / SHORT_SENTENCE_WORDS) * (1 + 0.25 * min(specifics, 4))


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC) if moment.tzinfo is not None else moment
