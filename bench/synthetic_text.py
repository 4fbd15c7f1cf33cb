"""Synthetic English-like text of given lengths (a fixed word list, a seeded
generator; no data set), for bench/long_memories.py."""

from __future__ import annotations

import math
import random

# common words and some that the model's vocabulary splits into several word pieces,
# as real answers have (names, technical terms)
_WORD_LIST = """
the a an and or but so if when while because after before then than that this these
those it its they them their we our you your he she his her i my me is are was were be
been being have has had do does did will would can could should may might must not no
yes all some any many much more most few each every other another same new old good
bad big small long short first last next early late right left high low great little
own time year day week month morning evening night today tomorrow yesterday people
person family friend child team manager doctor teacher neighbour customer garden house
kitchen office school station market river mountain city village road car train bike
book letter email message phone computer project meeting report plan idea question
answer problem reason result change money price water coffee dinner lunch breakfast
music movie game trip holiday weekend birthday party walk run cook read write call
send buy sell pay open close start finish try help need want like love hate know think
feel remember forget learn teach ask tell say speak listen watch see look find give
take make bring keep leave move live work play stay visit travel wait decide agree
explain describe suggest prefer expect arrive return happen seem become grow turn show
about above across along around at by for from in into near of off on out over through
to under up with without again also always never often sometimes usually already still
just only really very quite almost enough here there now soon later together maybe
quickly slowly carefully probably especially recently finally
photosynthesis kubernetes refactoring asynchronous dependency configuration
authentication serialization microservices throughput latency benchmark embedding
quarterly reimbursement spreadsheet itinerary vaccination orthodontist sourdough
fermentation hydrangeas marathon physiotherapy mortgage renovation insulation
thermostat chandelier saxophone violinist choreography archaeology astronomy telescope
Lisbon Kyoto Reykjavik Nairobi Montevideo Priya Tobias Mei Oluwaseun Ingrid Mateo
"""
WORDS = _WORD_LIST.split()
MAX_CONTENT_CHARS = 32_000  # memoryhub.settings MEMORYHUB["MAX_CONTENT_CHARS"]'s default


def sentence(rng: random.Random, words: int) -> str:
    """``words`` words from WORDS, capitalized, ending in a full stop or question mark."""
    chosen = [rng.choice(WORDS) for _ in range(words)]
    if rng.random() < 0.2:  # a clause
        chosen[rng.randrange(len(chosen))] += ","
    text = " ".join(chosen)
    return text[0].upper() + text[1:] + ("?" if rng.random() < 0.1 else ".")


def text_of_words(rng: random.Random, words: int) -> str:
    """Sentences of 4-20 words, ``words`` words in all."""
    sentences = []
    while words > 0:
        length = min(words, rng.randint(4, 20))
        sentences.append(sentence(rng, length))
        words -= length
    return " ".join(sentences)


def text_of_chars(rng: random.Random, chars: int) -> str:
    """Sentences cut to exactly ``chars`` characters."""
    text = ""
    while len(text) < chars:
        text += sentence(rng, rng.randint(4, 20)) + " "
    return text[: chars - 1] + "."


def word_count(size: str, rng: random.Random) -> int:
    """A text's length in words: a chat turn, or an assistant's answer (a long tail)."""
    if size == "short":
        return rng.randint(10, 30)
    # log-normal around 280 words, cut to 100-900: about 310 words on average
    return min(900, max(100, round(rng.lognormvariate(math.log(280), 0.5))))


def texts_generate(
    size: str, count: int, *, seed: int, variant: str = "", max_chars: int = MAX_CONTENT_CHARS
) -> list[str]:
    """``count`` texts of ``size`` (one of SIZES). The lengths depend on ``seed`` and
    ``size`` only, the words also on ``variant``: texts of the same lengths, different
    words."""
    lengths = random.Random(f"{seed}:{size}")
    words = random.Random(f"{seed}:{size}:{variant}")
    if size == "maximum":
        return [text_of_chars(words, max_chars) for _ in range(count)]
    return [text_of_words(words, word_count(size, lengths)) for _ in range(count)]
