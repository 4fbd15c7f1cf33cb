"""The offline fact extractor: English first-person statements a user makes in passing
("I moved to Lisbon last spring", "call me Sam", "I'm allergic to peanuts") turned
into drafts by patterns, with no model (their words and regular expressions are in
synopsis/extraction_lexicon.py). Precision over recall: a statement is only
mined when it stands on its own, so questions, negations, hypotheticals ("if I moved
to Rome") and what other people said are skipped. ``FactDraft`` is the draft every
extractor returns (synopsis/extraction.py re-exports it)."""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from memories.structured import FACT_CATEGORIES
from synopsis.extraction_lexicon import (
    ADV,
    AUX,
    CLAUSE_BREAK,
    COMMA,
    CONDITION_NAMES,
    CONDITIONS,
    DEPARTMENTS,
    FILLERS,
    GOAL_VERBS,
    HEDGE,
    I_,
    IM,
    JOBS,
    LIKES,
    LIST,
    MONTH,
    MONTHS,
    NAME,
    NOT_ASSERTED,
    NOT_GOALS,
    NOT_LIKES,
    NOT_NAMES,
    OBJECT_END,
    ORG,
    PETS,
    PLACE,
    QUESTION,
    QUOTED,
    REFERENT_PAIRS,
    REFERENTS,
    RELATION_NAMES,
    RELATIONS,
    REST,
    TRAILING,
    TRAILING_TIME,
    WE,
)

CATEGORIES: tuple[str, ...] = FACT_CATEGORIES
FACT, RELATIONSHIP, GOAL = "fact", "relationship", "goal"  # memories.models.Memory.Kind
EXPLICIT, CLEAR, HEDGED = 0.8, 0.7, 0.6  # confidence: "my name is", plain, "I think"


@dataclass(frozen=True)
class FactDraft:
    """A fact about the user, not stored yet; ``slot``/``value`` name a single-valued
    attribute (a new value supersedes the old one), None for multi-valued facts."""

    kind: str  # fact | relationship | goal
    content: str  # third person, starting with "User": "User lives in Lisbon."
    category: str  # one of CATEGORIES
    confidence: float  # 0..1
    slot: str | None  # e.g. "location.home"
    value: str | None  # the slot's value normalized for comparison: "lisbon"
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    goal_status: str | None = None  # open | done | abandoned
    due: str | None = None  # YYYY-MM-DD
    evidence: str = ""  # the sentence it came from


# --- helpers --------------------------------------------------------------------------


def normalize(value: str) -> str:
    """A value for comparison: lower case, single spaces, no leading article."""
    value = " ".join(value.lower().strip(" .,!?;:'\"").split())
    return re.sub(r"^(?:the|a|an)\s+", "", value)


def _tail(text: str, *, max_words: int, keep_time: bool = False) -> str | None:
    """The object of a statement: cut at the next clause, trimmed of fillers (and time
    phrases unless ``keep_time``), in the third person; None if it is a pronoun or long."""
    text = OBJECT_END.split(text, maxsplit=1)[0]
    if not LIST.match(text):  # "cats, dogs, and pollen" is one object
        text = COMMA.split(text, maxsplit=1)[0]
    text = text.strip(" .!?…'\")")
    previous = None
    while previous != text:
        previous = text
        text = TRAILING.sub("", text)
        text = text if keep_time else TRAILING_TIME.sub("", text)
        text = text.strip(" .!?…'\")")
    text = re.sub(r"\bmy\b", "their", re.sub(r"\bmyself\b", "themselves", text))
    words = text.split()
    if not words or len(words) > max_words or re.search(r"\b(?:I|me|you|your|yours)\b", text):
        return None
    if words[0].lower() in REFERENTS or " ".join(words[:2]).lower() in REFERENT_PAIRS:
        return None
    return text


def _items(text: str) -> list[str]:
    return [item for item in re.split(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", text) if item]


def _name(text: str, clause: str) -> str | None:
    """A person's name as written (capitalized), unless it is a common word."""
    words = text.split()
    lowercase_writer = not re.search(r"(?!\bI\b)[A-Z]", clause[1:])
    if words[0].lower() in NOT_NAMES or (words[0].islower() and not lowercase_writer):
        return None
    return " ".join(word[0].upper() + word[1:] for word in words)


def due_date(text: str) -> str | None:
    """The date of "by June 2027", "before 2027-06-30", "by the end of 2027", if clear."""
    marker = r"(?i:\b(?:by|before|until|in|on|no\s+later\s+than)\s+)(?:the\s+end\s+of\s+)?"
    if found := re.search(marker + r"(\d{4})-(\d{2})-(\d{2})\b", text):
        year, month, day = (int(group) for group in found.groups())
    elif found := re.search(
        marker + rf"(?:({MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?|(\d{{1,2}})(?:st|nd|rd|th)?"
        rf"\s+(?:of\s+)?({MONTH}),?|({MONTH}))\s+(\d{{4}})\b",
        text,
    ):
        month_name = (found[1] or found[4] or found[5]).lower()
        year, month = int(found[6]), MONTHS[month_name]
        end = "end of" in found[0].lower()
        day = int(found[2] or found[3] or (calendar.monthrange(year, month)[1] if end else 1))
    elif found := re.search(r"(?i:\b(?:by|before|until|in)\s+the\s+end\s+of\s+)(\d{4})\b", text):
        year, month, day = int(found[1]), 12, 31
    else:
        return None
    if not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    return f"{year:04d}-{month:02d}-{day:02d}"


def _fact(content: str, category: str, slot: str | None = None, value: str | None = None,
          confidence: float = CLEAR) -> FactDraft:  # fmt: skip
    return FactDraft(FACT, content, category, confidence, slot, value and normalize(value))


def _relation(predicate: str, name: str, content: str) -> FactDraft:
    return FactDraft(
        RELATIONSHIP, content, "relationship", CLEAR, None, None,
        subject="User", predicate=predicate, object=name,
    )  # fmt: skip


def _relative(word: str) -> str:
    word = " ".join(word.lower().split())
    return RELATION_NAMES.get(word, word).replace(" ", "_").replace("-", "_")


# --- the rules ------------------------------------------------------------------------

Build = Callable[[re.Match[str], str], list[FactDraft]]


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    build: Build  # the match and its clause -> drafts
    anywhere: bool = False  # mined wherever it stands in the clause ("I met my sister Ana")


RULES: list[Rule] = []


def rule(pattern: str, *, anywhere: bool = False) -> Callable[[Build], Build]:
    def register(build: Build) -> Build:
        RULES.append(Rule(re.compile(pattern), build, anywhere))
        return build

    return register


@rule(
    r"(?i:\bmy\s+name(?:'s|\s+is))\s+"
    r"(?P<name>[A-Za-zÀ-ÿ][\w'\-]*(?:\s+(?!I\b)[A-ZÀ-Þ][\w'\-]*){0,2})"
)
def _my_name(m: re.Match[str], clause: str) -> list[FactDraft]:
    name = _name(m["name"], clause)
    if name is None:
        return []
    return [_fact(f"User's name is {name}.", "identity", "identity.name", name, EXPLICIT)]


@rule(
    rf"{IM}\s+(?P<name>{NAME})"
    r"(?=\s*$|\s*[,!.;:)]|\s+(?:and|from|here|btw|by\s+the\s+way|again|too)\b)"
)
@rule(
    rf"(?i:\b(?:you\s+can\s+|please\s+|just\s+|(?:most\s+)?people\s+|everyone\s+|everybody\s+"
    rf"|(?:my\s+)?friends\s+)?calls?\s+me)\s+(?P<name>{NAME})\b(?!\s+[A-Z])"
)
def _called(m: re.Match[str], clause: str) -> list[FactDraft]:
    name = _name(m["name"], clause)
    return [_fact(f"User's name is {name}.", "identity", "identity.name", name)] if name else []


@rule(rf"{IM}\s+(?P<age>\d{{1,3}})(?:\s+years?\s+old|\s+y/?o)?(?=\s*$|\s*[,!.;])")
@rule(rf"{I_}{ADV}\s+turned\s+(?P<age>\d{{1,3}})(?=\s*$|\s*[,!.;]|\s+(?:last|this|in|on)\b)")
def _age(m: re.Match[str], clause: str) -> list[FactDraft]:
    age = int(m["age"])
    if not 5 <= age <= 120:
        return []
    return [_fact(f"User is {age} years old.", "identity", "identity.age", str(age))]


@rule(rf"{WE}{AUX}{ADV}\s+(?P<verb>live|living|reside|residing|based)\s+in\s+(?P<place>{PLACE})")
def _home(m: re.Match[str], clause: str) -> list[FactDraft]:
    if (m["verb"] in ("live", "reside")) == bool(m["aux"]):
        return []  # "I'm live in", "I living in"
    return [_fact(f"User lives in {m['place']}.", "location", "location.home", m["place"])]


@rule(
    rf"{WE}(?:'ve|\s+have)?{ADV}\s+(?:moved|relocated)\s+(?:back\s+)?to\s+(?P<place>{PLACE})"
    rf"(?:\s+(?:in|back\s+in)\s+(?P<when>(?:{MONTH}\s+)?\d{{4}}))?"
)
def _moved(m: re.Match[str], clause: str) -> list[FactDraft]:
    when = f" in {m['when']}" if m["when"] else ""
    return [_fact(f"User moved to {m['place']}{when}.", "location", "location.home", m["place"])]


@rule(rf"(?:{IM}|{I_}\s+come){ADV}\s+from\s+(?P<place>{PLACE})")
def _origin(m: re.Match[str], clause: str) -> list[FactDraft]:
    if m["place"] in DEPARTMENTS:
        return []  # a department, not a place
    return [_fact(f"User is from {m['place']}.", "location", "location.origin", m["place"])]


@rule(rf"{I_}\s+was\s+born\s+in\s+(?P<place>{PLACE})")
def _birthplace(m: re.Match[str], clause: str) -> list[FactDraft]:
    place = m["place"]
    return [_fact(f"User was born in {place}.", "location", "identity.birthplace", place)]


@rule(rf"{I_}{AUX}{ADV}\s+(?P<verb>work|working)\s+(?:at|for)\s+(?P<org>{ORG})")
@rule(
    rf"{I_}(?:'ve|\s+have)?{ADV}\s+(?:started\s+(?:a\s+new\s+job\s+|working\s+)?(?:at|with|for)"
    rf"|got\s+(?:a\s+(?:new\s+)?job|hired)\s+(?:at|by|with)|joined)\s+(?P<org>{ORG})"
)
def _employer(m: re.Match[str], clause: str) -> list[FactDraft]:
    if "verb" in m.groupdict() and (m["verb"] == "work") == bool(m["aux"]):
        return []
    if m["org"].islower() and "joined" in m[0]:
        return []  # "I joined a gym"
    return [_fact(f"User works at {m['org']}.", "work", "work.employer", m["org"])]


@rule(rf"{IM}{ADV}\s+self-employed|{I_}{ADV}\s+work\s+for\s+myself")
def _self_employed(m: re.Match[str], clause: str) -> list[FactDraft]:
    return [_fact("User is self-employed.", "work", "work.employer", "self-employed")]


@rule(
    rf"(?:{IM}|{I_}{ADV}\s+work\s+as){ADV}\s+(?P<article>an?\s+)(?P<job>(?:[a-z][\w\-]*\s+){{0,2}}?"
    rf"(?:{JOBS}))(?:\s+(?:at|for)\s+(?P<org>{ORG}))?(?=\s*$|[\s,.!;])"
)
def _job(m: re.Match[str], clause: str) -> list[FactDraft]:
    job, org, article = m["job"], m["org"], m["article"].strip()
    if job.split()[-1] == "student" and org:
        return [_fact(f"User is a student at {org}.", "work", "work.job_title", job)]
    drafts = [_fact(f"User is {article} {job}.", "work", "work.job_title", job)]
    if org:
        drafts.append(_fact(f"User works at {org}.", "work", "work.employer", org))
    return drafts


@rule(
    rf"{I_}(?:'m|\s+am)?{ADV}\s+(?P<verb>love|like|enjoy|adore|hate|detest|loathe|dislike"
    rf"|don't\s+like|do\s+not\s+like|can't\s+stand|cannot\s+stand|into"
    rf"|a\s+(?:big\s+|huge\s+)?fan\s+of){REST}"
)
def _likes(m: re.Match[str], clause: str) -> list[FactDraft]:
    verb = re.sub(r"^a\s+(?:big\s+|huge\s+)?", "", " ".join(m["verb"].split()))
    is_state = verb in ("into", "fan of")
    if is_state != bool(re.search(r"'m|\bam\b", m[0][: m.start("verb") - m.start()])):
        return []
    what = _tail(m["what"], max_words=8)
    if what is None or NOT_LIKES.match(what):
        return []
    return [_fact(f"User {LIKES[verb]} {what}.", "preference")]


@rule(
    r"(?i:\bmy\s+(?:all[- ]time\s+)?favou?rite)\s+(?P<thing>[a-z]+(?:\s+[a-z]+)?)\s+"
    rf"(?:is|are){REST}"
)
def _favorite(m: re.Match[str], clause: str) -> list[FactDraft]:
    thing, what = m["thing"].lower(), _tail(m["what"], max_words=6)
    if what is None or thing in ("thing", "part", "bit", "one", "way", "thing about"):
        return []
    slot = "preference.favorite_" + thing.replace(" ", "_")
    return [_fact(f"User's favorite {thing} is {what}.", "preference", slot, what)]


@rule(
    rf"(?i:\bmy\s+(?:(?:little|big|older|younger|baby|twin|eldest|oldest|youngest|late)\s+)?)"
    rf"(?P<rel>(?i:{RELATIONS})(?:-in-law)?)"
    r"(?:,\s*|\s+|(?i:\s+is\s+(?:called|named)\s+|'s\s+name\s+is\s+))"
    rf"(?P<name>{NAME}(?:\s+{NAME})?)\b",
    anywhere=True,
)
def _my_relative(m: re.Match[str], clause: str) -> list[FactDraft]:
    name = _name(m["name"], clause)
    if name is None:
        return []
    predicate = _relative(m["rel"])
    return [_relation(predicate, name, f"User's {predicate.replace('_', ' ')} is {name}.")]


@rule(
    rf"{WE}(?:\s+have|'ve\s+got|\s+have\s+got){ADV}\s+(?P<count>an?|one|two|three|four|five|six|\d)"
    rf"\s+(?P<rel>(?i:{RELATIONS}|kids|children|sons|daughters|sisters|brothers|grandchildren))"
    rf"(?:(?:\s+(?:called|named)\s+|,\s*)(?P<name>{NAME}))?(?=\s*$|[\s,.!;])"
)
def _relatives(m: re.Match[str], clause: str) -> list[FactDraft]:
    name = m["name"] and _name(m["name"], clause)
    if name and m["count"] in ("a", "an", "one"):
        predicate = _relative(m["rel"])
        return [_relation(predicate, name, f"User's {predicate.replace('_', ' ')} is {name}.")]
    return [_fact(f"User has {m['count']} {m['rel']}.", "relationship")]


@rule(
    rf"(?i:\bmy\s+(?:(?:little|old|new)\s+)?)(?P<pet>(?i:{PETS}))(?:,\s*|\s+"
    rf"|(?i:\s+is\s+(?:called|named)\s+|'s\s+name\s+is\s+))(?P<name>{NAME})\b",
    anywhere=True,
)
@rule(
    rf"{WE}(?:\s+have|'ve\s+got|\s+have\s+got){ADV}\s+(?P<count>an?|one|two|three|\d)\s+"
    rf"(?P<pet>(?:{PETS})s?)(?:(?:\s+(?:called|named)\s+|,\s*)(?P<name>{NAME}))?(?=\s*$|[\s,.!;])"
)
def _pet(m: re.Match[str], clause: str) -> list[FactDraft]:
    pet, count = " ".join(m["pet"].lower().split()), m.groupdict().get("count") or "a"
    name = m["name"] and _name(m["name"], clause)
    if count.lower() not in ("a", "an", "one"):
        return [_fact(f"User has {count} {pet}.", "relationship")]
    article = "an" if pet[0] in "aeiou" else "a"
    if not name:
        return [_fact(f"User has {article} {pet}.", "relationship")]
    return [_relation("has_pet", name, f"User has {article} {pet} named {name}.")]


@rule(rf"{IM}\s+married\s+to\s+(?P<name>{NAME}(?:\s+{NAME})?)\b")
def _spouse(m: re.Match[str], clause: str) -> list[FactDraft]:
    name = _name(m["name"], clause)
    return [_relation("spouse", name, f"User is married to {name}.")] if name else []


@rule(rf"{IM}{ADV}\s+(?P<status>married|single|divorced|engaged|widowed)(?=\s*$|\s*[,.!;])")
def _marital(m: re.Match[str], clause: str) -> list[FactDraft]:
    status = m["status"]
    return [_fact(f"User is {status}.", "relationship", "identity.marital_status", status)]


@rule(
    rf"{IM}{ADV}\s+(?:(?:very|highly|severely|seriously|deathly|mildly|a\s+(?:bit|little))\s+)?"
    rf"allergic\s+to{REST}"
)
@rule(rf"{I_}\s+have\s+(?:an?\s+)?(?:(?:severe|mild|bad)\s+)?allerg(?:y|ies)\s+to{REST}")
def _allergy(m: re.Match[str], clause: str) -> list[FactDraft]:
    what = _tail(m["what"], max_words=8)
    items = _items(what) if what else []
    return [_fact(f"User is allergic to {item}.", "health", confidence=EXPLICIT) for item in items]


@rule(rf"{I_}\s+have\s+(?:an?\s+)?(?:(?:severe|mild|bad)\s+)?(?P<what>[a-z]+)\s+allergy\b")
def _allergy_named(m: re.Match[str], clause: str) -> list[FactDraft]:
    return [_fact(f"User has a {m['what']} allergy.", "health", confidence=EXPLICIT)]


@rule(rf"{IM}{ADV}\s+(?P<what>lactose|gluten|fructose|histamine)[- ]intolerant\b")
def _intolerance(m: re.Match[str], clause: str) -> list[FactDraft]:
    return [_fact(f"User is {m['what']} intolerant.", "health", confidence=EXPLICIT)]


@rule(
    rf"(?:{I_}(?:'ve|\s+have)(?:\s+got)?|{I_}\s+suffer\s+from|{I_}\s+was\s+diagnosed\s+with)"
    rf"{ADV}\s+(?P<what>(?i:{CONDITIONS}))(?![\w-])"
)
@rule(rf"{IM}{ADV}\s+(?P<what>diabetic|celiac|coeliac|asthmatic|epileptic|pregnant)\b")
def _condition(m: re.Match[str], clause: str) -> list[FactDraft]:
    what = CONDITION_NAMES.get(m["what"], m["what"])
    verb = "is" if what == "pregnant" else "has"
    return [_fact(f"User {verb} {what}.", "health")]


@rule(
    rf"{IM}{ADV}\s+(?:an?\s+)?(?:strict\s+)?(?P<diet>vegetarian|vegan|pescatarian|pescetarian)\b"
    rf"(?!\s+(?:restaurant|food|recipe|option|dish|place|meal))"
)
def _diet(m: re.Match[str], clause: str) -> list[FactDraft]:
    return [_fact(f"User is {m['diet']}.", "preference", "preference.diet", m["diet"])]


@rule(rf"{I_}{ADV}\s+speak\s+(?P<langs>[A-Z][a-z]+(?:(?:,\s*|,?\s+and\s+)[A-Z][a-z]+)*)")
def _languages(m: re.Match[str], clause: str) -> list[FactDraft]:
    return [_fact(f"User speaks {m['langs']}.", "identity")]


@rule(
    rf"(?i:\bmy\s+birthday\s+is\s+(?:on\s+)?)(?:(?P<m1>{MONTH})\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?"
    rf"|(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m2>{MONTH}))\b"
)
def _birthday(m: re.Match[str], clause: str) -> list[FactDraft]:
    month, day = MONTHS[(m["m1"] or m["m2"]).lower()], int(m["d1"] or m["d2"])
    if day > calendar.monthrange(2024, month)[1]:
        return []
    said, value = f"{calendar.month_name[month]} {day}", f"{month:02d}-{day:02d}"
    return [_fact(f"User's birthday is {said}.", "identity", "identity.birthday", value)]


@rule(
    rf"{I_}(?P<aux>'m|\s+am)?{ADV}\s+(?P<verb>{'|'.join(GOAL_VERBS)})(?P<to>\s+to)?"
    r"\s+(?P<what>[a-z].*)$"
)
@rule(
    r"(?i:\bmy\s+(?:main\s+|big\s+|new\s+)?(?P<noun>goal|plan|dream|resolution|aim)\s+"
    r"(?:for\s+(?:this|next)\s+year\s+)?is\s+to)\s+(?P<what>.+)$"
)
def _goal(m: re.Match[str], clause: str) -> list[FactDraft]:
    groups = m.groupdict()
    if "verb" in groups:
        verb = m["verb"]
        if verb.endswith("ing") == (not m["aux"]) or (verb == "wanna") == bool(m["to"]):
            return []
        said = f"User {GOAL_VERBS[verb]}"
    else:
        said = f"User's {m['noun'].lower()} is to"
    what = _tail(m["what"], max_words=14, keep_time=True)
    if what is None or NOT_GOALS.search(what):
        return []
    return [
        FactDraft(GOAL, f"{said} {what}.", "goal", CLEAR, None, None, goal_status="open",
                  due=due_date(what))
    ]  # fmt: skip


# --- the extractor --------------------------------------------------------------------


def _sentences(text: str) -> Iterator[str]:
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    pieces = [piece.strip() for piece in re.split(r"(?<=[.!?…])\s+|\s*\n+\s*", text)]
    sentence = ""
    for piece in pieces:
        sentence = f"{sentence} {piece}".strip()
        if not re.search(r"\b(?:Mr|Mrs|Ms|Dr|St|Mt|Jr|Sr|vs|etc)\.$", sentence):
            if sentence:
                yield sentence
            sentence = ""
    if sentence:
        yield sentence


def _prefix_allowed(prefix: str) -> bool:
    """Whether only fillers ("Oh, and also", "Last spring") precede the statement."""
    words = re.findall(r"[a-z0-9']+", HEDGE.sub(" ", prefix.lower()))
    return all(word in FILLERS or word.isdigit() for word in words)


def _clause_drafts(clause: str, evidence: str) -> Iterator[FactDraft]:
    clause = NOT_ASSERTED.split(clause, maxsplit=1)[0].strip(" ,.!")
    for current in RULES:
        for match in current.pattern.finditer(clause):
            if not current.anywhere and not _prefix_allowed(clause[: match.start()]):
                continue
            hedged = bool(HEDGE.search(clause[: match.end()]))
            for draft in current.build(match, clause):
                confidence = min(draft.confidence, HEDGED) if hedged else draft.confidence
                yield replace(draft, confidence=confidence, evidence=evidence)


def facts_draft_offline(text: str) -> list[FactDraft]:
    """The facts about the user in ``text`` (what the user wrote) found by the English
    patterns above, in order, each once; pure and deterministic."""
    drafts: list[FactDraft] = []
    seen: set[tuple[str, str]] = set()
    for sentence in _sentences(text):
        if sentence.rstrip(" )\"'").endswith("?") or QUESTION.match(sentence):
            continue
        for clause in CLAUSE_BREAK.split(QUOTED.sub(" ", sentence)):
            for draft in _clause_drafts(clause.strip(), sentence):
                if (draft.kind, draft.content.lower()) not in seen:
                    seen.add((draft.kind, draft.content.lower()))
                    drafts.append(draft)
    return drafts
