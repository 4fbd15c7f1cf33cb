"""The offline fact extractor's rules (synopsis/extraction_offline.py runs them): one
pattern, or a few, per kind of statement ("my name is", "I moved to", "I'm allergic to",
"I want to"), each with the function that turns a match into drafts. A rule is mined at
the start of a clause (after fillers only) unless it says ``anywhere``; the order here is
the order drafts come out in."""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass

from synopsis.extraction_drafts import (
    CLEAR,
    EXPLICIT,
    GOAL,
    FactDraft,
    due_date,
    fact,
    person_name,
    relation,
    relation_predicate,
    split_list,
    tail,
)
from synopsis.extraction_lexicon import (
    ADV,
    AUX,
    CONDITION_NAMES,
    CONDITIONS,
    DEPARTMENTS,
    GOAL_VERBS,
    I_,
    IM,
    JOBS,
    LIKES,
    MONTH,
    MONTHS,
    NAME,
    NOT_GOALS,
    NOT_LIKES,
    ORG,
    PETS,
    PLACE,
    RELATIONS,
    REST,
    WE,
)

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
    name = person_name(m["name"], clause)
    if name is None:
        return []
    return [fact(f"User's name is {name}.", "identity", "identity.name", name, EXPLICIT)]


@rule(
    rf"{IM}\s+(?P<name>{NAME})"
    r"(?=\s*$|\s*[,!.;:)]|\s+(?:and|from|here|btw|by\s+the\s+way|again|too)\b)"
)
@rule(
    rf"(?i:\b(?:you\s+can\s+|please\s+|just\s+|(?:most\s+)?people\s+|everyone\s+|everybody\s+"
    rf"|(?:my\s+)?friends\s+)?calls?\s+me)\s+(?P<name>{NAME})\b(?!\s+[A-Z])"
)
def _called(m: re.Match[str], clause: str) -> list[FactDraft]:
    name = person_name(m["name"], clause)
    return [fact(f"User's name is {name}.", "identity", "identity.name", name)] if name else []


@rule(rf"{IM}\s+(?P<age>\d{{1,3}})(?:\s+years?\s+old|\s+y/?o)?(?=\s*$|\s*[,!.;])")
@rule(rf"{I_}{ADV}\s+turned\s+(?P<age>\d{{1,3}})(?=\s*$|\s*[,!.;]|\s+(?:last|this|in|on)\b)")
def _age(m: re.Match[str], clause: str) -> list[FactDraft]:
    age = int(m["age"])
    if not 5 <= age <= 120:
        return []
    return [fact(f"User is {age} years old.", "identity", "identity.age", str(age))]


@rule(rf"{WE}{AUX}{ADV}\s+(?P<verb>live|living|reside|residing|based)\s+in\s+(?P<place>{PLACE})")
def _home(m: re.Match[str], clause: str) -> list[FactDraft]:
    if (m["verb"] in ("live", "reside")) == bool(m["aux"]):
        return []  # "I'm live in", "I living in"
    return [fact(f"User lives in {m['place']}.", "location", "location.home", m["place"])]


@rule(
    rf"{WE}(?:'ve|\s+have)?{ADV}\s+(?:moved|relocated)\s+(?:back\s+)?to\s+(?P<place>{PLACE})"
    rf"(?:\s+(?:in|back\s+in)\s+(?P<when>(?:{MONTH}\s+)?\d{{4}}))?"
)
def _moved(m: re.Match[str], clause: str) -> list[FactDraft]:
    when = f" in {m['when']}" if m["when"] else ""
    return [fact(f"User moved to {m['place']}{when}.", "location", "location.home", m["place"])]


@rule(rf"(?:{IM}|{I_}\s+come){ADV}\s+from\s+(?P<place>{PLACE})")
def _origin(m: re.Match[str], clause: str) -> list[FactDraft]:
    if m["place"] in DEPARTMENTS:
        return []  # a department, not a place
    return [fact(f"User is from {m['place']}.", "location", "location.origin", m["place"])]


@rule(rf"{I_}\s+was\s+born\s+in\s+(?P<place>{PLACE})")
def _birthplace(m: re.Match[str], clause: str) -> list[FactDraft]:
    place = m["place"]
    return [fact(f"User was born in {place}.", "location", "identity.birthplace", place)]


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
    return [fact(f"User works at {m['org']}.", "work", "work.employer", m["org"])]


@rule(rf"{IM}{ADV}\s+self-employed|{I_}{ADV}\s+work\s+for\s+myself")
def _self_employed(m: re.Match[str], clause: str) -> list[FactDraft]:
    return [fact("User is self-employed.", "work", "work.employer", "self-employed")]


@rule(
    rf"(?:{IM}|{I_}{ADV}\s+work\s+as){ADV}\s+(?P<article>an?\s+)(?P<job>(?:[a-z][\w\-]*\s+){{0,2}}?"
    rf"(?:{JOBS}))(?:\s+(?:at|for)\s+(?P<org>{ORG}))?(?=\s*$|[\s,.!;])"
)
def _job(m: re.Match[str], clause: str) -> list[FactDraft]:
    job, org, article = m["job"], m["org"], m["article"].strip()
    if job.split()[-1] == "student" and org:
        return [fact(f"User is a student at {org}.", "work", "work.job_title", job)]
    drafts = [fact(f"User is {article} {job}.", "work", "work.job_title", job)]
    if org:
        drafts.append(fact(f"User works at {org}.", "work", "work.employer", org))
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
    what = tail(m["what"], max_words=8)
    if what is None or NOT_LIKES.match(what):
        return []
    return [fact(f"User {LIKES[verb]} {what}.", "preference")]


@rule(
    r"(?i:\bmy\s+(?:all[- ]time\s+)?favou?rite)\s+(?P<thing>[a-z]+(?:\s+[a-z]+)?)\s+"
    rf"(?:is|are){REST}"
)
def _favorite(m: re.Match[str], clause: str) -> list[FactDraft]:
    thing, what = m["thing"].lower(), tail(m["what"], max_words=6)
    if what is None or thing in ("thing", "part", "bit", "one", "way", "thing about"):
        return []
    slot = "preference.favorite_" + thing.replace(" ", "_")
    return [fact(f"User's favorite {thing} is {what}.", "preference", slot, what)]


@rule(
    rf"(?i:\bmy\s+(?:(?:little|big|older|younger|baby|twin|eldest|oldest|youngest|late)\s+)?)"
    rf"(?P<rel>(?i:{RELATIONS})(?:-in-law)?)"
    r"(?:,\s*|\s+|(?i:\s+is\s+(?:called|named)\s+|'s\s+name\s+is\s+))"
    rf"(?P<name>{NAME}(?:\s+{NAME})?)\b",
    anywhere=True,
)
def _my_relative(m: re.Match[str], clause: str) -> list[FactDraft]:
    name = person_name(m["name"], clause)
    if name is None:
        return []
    predicate = relation_predicate(m["rel"])
    return [relation(predicate, name, f"User's {predicate.replace('_', ' ')} is {name}.")]


@rule(
    rf"{WE}(?:\s+have|'ve\s+got|\s+have\s+got){ADV}\s+(?P<count>an?|one|two|three|four|five|six|\d)"
    rf"\s+(?P<rel>(?i:{RELATIONS}|kids|children|sons|daughters|sisters|brothers|grandchildren))"
    rf"(?:(?:\s+(?:called|named)\s+|,\s*)(?P<name>{NAME}))?(?=\s*$|[\s,.!;])"
)
def _relatives(m: re.Match[str], clause: str) -> list[FactDraft]:
    name = m["name"] and person_name(m["name"], clause)
    if name and m["count"] in ("a", "an", "one"):
        predicate = relation_predicate(m["rel"])
        return [relation(predicate, name, f"User's {predicate.replace('_', ' ')} is {name}.")]
    return [fact(f"User has {m['count']} {m['rel']}.", "relationship")]


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
    name = m["name"] and person_name(m["name"], clause)
    if count.lower() not in ("a", "an", "one"):
        return [fact(f"User has {count} {pet}.", "relationship")]
    article = "an" if pet[0] in "aeiou" else "a"
    if not name:
        return [fact(f"User has {article} {pet}.", "relationship")]
    return [relation("has_pet", name, f"User has {article} {pet} named {name}.")]


@rule(rf"{IM}\s+married\s+to\s+(?P<name>{NAME}(?:\s+{NAME})?)\b")
def _spouse(m: re.Match[str], clause: str) -> list[FactDraft]:
    name = person_name(m["name"], clause)
    return [relation("spouse", name, f"User is married to {name}.")] if name else []


@rule(rf"{IM}{ADV}\s+(?P<status>married|single|divorced|engaged|widowed)(?=\s*$|\s*[,.!;])")
def _marital(m: re.Match[str], clause: str) -> list[FactDraft]:
    status = m["status"]
    return [fact(f"User is {status}.", "relationship", "identity.marital_status", status)]


@rule(
    rf"{IM}{ADV}\s+(?:(?:very|highly|severely|seriously|deathly|mildly|a\s+(?:bit|little))\s+)?"
    rf"allergic\s+to{REST}"
)
@rule(rf"{I_}\s+have\s+(?:an?\s+)?(?:(?:severe|mild|bad)\s+)?allerg(?:y|ies)\s+to{REST}")
def _allergy(m: re.Match[str], clause: str) -> list[FactDraft]:
    what = tail(m["what"], max_words=8)
    items = split_list(what) if what else []
    return [fact(f"User is allergic to {item}.", "health", confidence=EXPLICIT) for item in items]


@rule(rf"{I_}\s+have\s+(?:an?\s+)?(?:(?:severe|mild|bad)\s+)?(?P<what>[a-z]+)\s+allergy\b")
def _allergy_named(m: re.Match[str], clause: str) -> list[FactDraft]:
    return [fact(f"User has a {m['what']} allergy.", "health", confidence=EXPLICIT)]


@rule(rf"{IM}{ADV}\s+(?P<what>lactose|gluten|fructose|histamine)[- ]intolerant\b")
def _intolerance(m: re.Match[str], clause: str) -> list[FactDraft]:
    return [fact(f"User is {m['what']} intolerant.", "health", confidence=EXPLICIT)]


@rule(
    rf"(?:{I_}(?:'ve|\s+have)(?:\s+got)?|{I_}\s+suffer\s+from|{I_}\s+was\s+diagnosed\s+with)"
    rf"{ADV}\s+(?P<what>(?i:{CONDITIONS}))(?![\w-])"
)
@rule(rf"{IM}{ADV}\s+(?P<what>diabetic|celiac|coeliac|asthmatic|epileptic|pregnant)\b")
def _condition(m: re.Match[str], clause: str) -> list[FactDraft]:
    what = CONDITION_NAMES.get(m["what"], m["what"])
    verb = "is" if what == "pregnant" else "has"
    return [fact(f"User {verb} {what}.", "health")]


@rule(
    rf"{IM}{ADV}\s+(?:an?\s+)?(?:strict\s+)?(?P<diet>vegetarian|vegan|pescatarian|pescetarian)\b"
    rf"(?!\s+(?:restaurant|food|recipe|option|dish|place|meal))"
)
def _diet(m: re.Match[str], clause: str) -> list[FactDraft]:
    return [fact(f"User is {m['diet']}.", "preference", "preference.diet", m["diet"])]


@rule(rf"{I_}{ADV}\s+speak\s+(?P<langs>[A-Z][a-z]+(?:(?:,\s*|,?\s+and\s+)[A-Z][a-z]+)*)")
def _languages(m: re.Match[str], clause: str) -> list[FactDraft]:
    return [fact(f"User speaks {m['langs']}.", "identity")]


@rule(
    rf"(?i:\bmy\s+birthday\s+is\s+(?:on\s+)?)(?:(?P<m1>{MONTH})\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?"
    rf"|(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m2>{MONTH}))\b"
)
def _birthday(m: re.Match[str], clause: str) -> list[FactDraft]:
    month, day = MONTHS[(m["m1"] or m["m2"]).lower()], int(m["d1"] or m["d2"])
    if day > calendar.monthrange(2024, month)[1]:
        return []
    said, value = f"{calendar.month_name[month]} {day}", f"{month:02d}-{day:02d}"
    return [fact(f"User's birthday is {said}.", "identity", "identity.birthday", value)]


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
    what = tail(m["what"], max_words=14, keep_time=True)
    if what is None or NOT_GOALS.search(what):
        return []
    return [
        FactDraft(
            GOAL,
            f"{said} {what}.",
            "goal",
            CLEAR,
            None,
            None,
            goal_status="open",
            due=due_date(what),
        )
    ]
