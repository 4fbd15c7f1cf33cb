"""The time a query names: "on October 13, 2023", "in May 2023", "in 2022", "in June",
"last year", "three weeks ago", "yesterday" as a range of memory times.

The search's time path (``memories.services.search``) ranks the memories of that range
beside the whole ranking and raises them: a question about "what she painted in July
2023" is about July's turns, which the words and the vector alone rank no higher than
the other paintings. A month without a year ("in June") and relative phrases are read
against an anchor, the time the question is asked (now, or the newest turn of a
replayed conversation). A day without a year ("on March 20") names no range: it is
most often an event the conversation mentions (a webinar rescheduled to March 27), not
when something was said. "before"/"until"/"by" and "after"/"since" open the range on
one side (the search's time path leaves such ranges out: they hold most memories).
The first phrase found counts, the most precise first.

Every pattern is a sequence of bounded alternatives and single character classes, no
nested repetition: linear in the query (tests/test_text_linear.py).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\b\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)\b"
_SIDE = r"(?:(?P<side>before|until|till|by|after|since|from)\s+)?"
_TEXT_MAX = 2_000  # the first characters of a query are read (a question is short)
# a named day covers its neighbours too: a turn's time zone is not the question's
DAY_MARGIN = timedelta(days=1)
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a few": 3,
    "few": 3,
    "several": 3,
    "a couple of": 2,
    "couple of": 2,
}

PATTERNS = [
    (
        "day",
        re.compile(
            rf"\b{_SIDE}(?:on\s+)?(?:(?P<iso>(?:19|20)\d\d-[01]?\d-[0-3]?\d)\b"
            rf"|{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}"
            rf"|{_MONTH.replace('month', 'month2')}\s+(?P<day2>[0-3]?\d)(?:st|nd|rd|th)?,?\s+"
            rf"(?P<year2>(?:19|20)\d\d)\b)",
            re.IGNORECASE,
        ),
    ),
    ("month", re.compile(rf"\b{_SIDE}(?:in\s+)?{_MONTH},?\s+(?:of\s+)?{_YEAR}", re.IGNORECASE)),
    (
        "year",
        re.compile(
            rf"\b(?:(?P<side>before|until|till|by|after|since)|in|during|throughout|of)\s+"
            rf"(?:(?:early|late|mid)-?\s*)?{_YEAR}",
            re.IGNORECASE,
        ),
    ),
    (
        "month of a year",
        re.compile(
            # not "this": "this may help"
            rf"\b(?:(?P<side>before|until|till|by|after|since)\s+)?"
            rf"(?:in|during|last|early|late|mid-?)\s+{_MONTH}",
            re.IGNORECASE,
        ),
    ),
    (
        "relative",
        re.compile(
            r"\b(?P<relative>yesterday|today|tonight"
            r"|(?P<which>last|this|past|previous)\s+(?P<unit>week(?:end)?|month|year)"
            r"|(?P<count>\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten"
            r"|(?:a\s+)?few|several|(?:a\s+)?couple\s+of)\s+(?P<units>day|week|month|year)s?"
            r"\s+ago)\b",
            re.IGNORECASE,
        ),
    ),
]


@dataclass(frozen=True)
class TimeRange:
    """Memory times from ``start`` (inclusive) to ``end`` (exclusive), either open
    (None), and the words of the query that named it."""

    start: datetime | None
    end: datetime | None
    phrase: str

    def explain(self) -> dict[str, str | None]:
        return {
            "phrase": self.phrase,
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
        }


def query_time_range(query: str | None, anchor: datetime | None = None) -> TimeRange | None:
    """The range of times ``query`` names, read against ``anchor`` (default now, UTC);
    None when it names none (or an impossible date)."""
    if not query:
        return None
    text = query[:_TEXT_MAX]
    anchor = (anchor or datetime.now(UTC)).astimezone(UTC)
    for kind, pattern in PATTERNS:
        for match in pattern.finditer(text):
            span = _span(kind, match, anchor)
            if span is not None:
                return _sided(span, match.groupdict().get("side"), " ".join(match[0].split()))
    return None


def _span(kind: str, match: re.Match[str], anchor: datetime) -> tuple[datetime, datetime] | None:
    """The whole period a match names: [start, end)."""
    found = {name: value for name, value in match.groupdict().items() if value}
    try:
        if kind == "relative":
            return _relative(found, anchor)
        if found.get("iso"):
            year, month, day = (int(part) for part in found["iso"].split("-"))
            return _day(datetime(year, month, day, tzinfo=UTC))
        month = MONTHS[(found.get("month") or found.get("month2") or "jan").lower().rstrip(".")]
        year = int(found.get("year") or found.get("year2") or 0)
        day = int(found.get("day") or found.get("day2") or 0)
        if kind == "day":
            return _day(datetime(year, month, day, tzinfo=UTC))
        if kind == "month":
            return _month(year, month)
        if kind == "year":
            return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
        # the latest such month at or before the anchor
        return _month(anchor.year - (month > anchor.month), month)
    except ValueError:  # 31 February, month 13
        return None


def _day(day: datetime) -> tuple[datetime, datetime]:
    return day - DAY_MARGIN, day + timedelta(days=1) + DAY_MARGIN


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    days = calendar.monthrange(year, month)[1]
    return start, start + timedelta(days=days)


def _relative(found: dict[str, str], anchor: datetime) -> tuple[datetime, datetime] | None:
    """ "yesterday", "last month", "three weeks ago" against the anchor's day."""
    today = anchor.replace(hour=0, minute=0, second=0, microsecond=0)
    phrase = found["relative"].lower()
    if phrase in ("today", "tonight"):
        return _day(today)
    if phrase == "yesterday":
        return _day(today - timedelta(days=1))
    if unit := found.get("unit"):
        back = 0 if found["which"].lower() == "this" else 1
        return _period(today, unit.lower(), back)
    count = found["count"].lower()
    number = int(count) if count.isdigit() else NUMBERS[" ".join(count.split())]
    return _period(today, found["units"].lower(), number)


def _period(today: datetime, unit: str, back: int) -> tuple[datetime, datetime]:
    """The calendar ``unit`` (day, week, weekend, month, year) ``back`` units before the
    one holding ``today``."""
    if unit == "day":
        return _day(today - timedelta(days=back))
    if unit in ("week", "weekend"):
        monday = today - timedelta(days=today.weekday() + 7 * back)
        if unit == "weekend":
            return _day(monday + timedelta(days=5))[0], monday + timedelta(days=7) + DAY_MARGIN
        return monday, monday + timedelta(days=7)
    if unit == "month":
        months = today.year * 12 + today.month - 1 - back
        return _month(months // 12, months % 12 + 1)
    return datetime(today.year - back, 1, 1, tzinfo=UTC), datetime(
        today.year - back + 1, 1, 1, tzinfo=UTC
    )


def _sided(span: tuple[datetime, datetime], side: str | None, phrase: str) -> TimeRange:
    """The span, or the time before or after it when the phrase says so."""
    start, end = span
    side = (side or "").lower()
    if side in ("before", "until", "till", "by"):
        return TimeRange(None, start, phrase)
    if side in ("after", "since", "from"):
        return TimeRange(end if side == "after" else start, None, phrase)
    return TimeRange(start, end, phrase)
