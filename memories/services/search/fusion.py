"""Auto mode's neighbour fusion: a conversation turn raised by the turns around it.

Evidence in a conversation often sits one turn away from the turn that matches the
question (a question and its answer): on LoCoMo's short turns raising each turn by
its neighbours' scores is worth 6 points of recall@10 (BENCHMARKS.md). A turn long
enough to be found by its own text is not raised: on BEAM, where an assistant's
answer runs to hundreds of words, raising every turn let the long answers, which both
signals already favour, fill the top with their neighbours' scores added, while the
short user turns that hold most of the evidence (a request, a preference, a date)
take their context from the long answer next to them. Receiving turns of at most
``search.neighbour_max_bytes`` bytes of text (a turn's size as BM25 counts it, read
from the stored value's header; characters for ASCII): BEAM auto recall@10 51.9 ->
58.2, LoCoMo unchanged (its longest turn has 446 characters); any cap between 500 and
1,500 gives the same within 0.5 points.
"""

from __future__ import annotations

from typing import Any


def neighbour_fusion(
    adjacent: dict[Any, set[Any]],
    parts: dict[Any, dict[str, float]],
    *,
    beta: float,
    lengths: dict[Any, int],
    max_bytes: int,
) -> None:
    """Adds to each part its neighbours' bonus, the fused score (in 0..1 like the
    base) and, where ``lengths`` has it, the turn's size (``bytes``). The fused
    score is ``(base + beta x the neighbours' bases) / (1 + 2 beta)``, the bonus given
    only to turns of at most ``max_bytes`` bytes (0: to every turn; a memory of
    unknown length counts as short). ``adjacent`` holds each candidate's neighbouring
    candidates, in both directions."""
    for memory_id, part in parts.items():
        length = lengths.get(memory_id)
        if length is not None:
            part["bytes"] = float(length)
        receives = not max_bytes or (length or 0) <= max_bytes
        bonus = beta * sum(parts[n]["base"] for n in adjacent[memory_id]) if receives else 0.0
        part["neighbours"] = bonus
        part["fused"] = (part["base"] + bonus) / (1 + 2 * beta)
