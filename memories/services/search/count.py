"""The count step: how many memories pass the filters (BM25's collection size, and what
chooses the vector scan), and the query's words in the same statement.

Both are short reads every fused search makes before its signals, each a round trip of
~0.6 ms on a small set: one statement instead of two (BENCHMARKS.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from memories.models import Project
from memories.providers.kept import Kept
from memories.services.search.filters import SearchFilters
from memories.services.search.kept import set_key
from memories.services.search.keyword import (
    QUERY_WORDS_COLUMNS,
    QueryWords,
    query_words,
    query_words_read,
)
from memories.services.search.prepared import prepared_cursor


@dataclass
class Counted:
    size: int  # the filtered set's rows (see collection_size_get)
    words: QueryWords | None  # the query text's words (keyword.py), None without a text


def filtered_count(*, project: Project, filters: SearchFilters, text: str | None = None) -> Counted:
    """The filtered set's size (``collection_size_get``) and, given a ``text``, its words
    (keyword.py's ``query_words``), in one statement when the set is counted."""
    cap = int(settings.RETRIEVAL["KEYWORD_MAX_MATCHES"])
    key = set_key(project, filters)
    words_columns = f", {QUERY_WORDS_COLUMNS}" if text else ""
    if (kept := _large_sizes.get(key)) is not None:
        return Counted(kept, query_words(text) if text else None)
    where, params = filters.sql(project)
    with prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT count(*) FROM (SELECT 1 FROM memories_memory m WHERE {where}"
            f" LIMIT %(cap)s) s){words_columns}",
            {**params, "cap": cap + 1, "text": text},
        )
        size, *row = cursor.fetchone()
    words = query_words_read(*row) if text else None
    if size <= cap:
        return Counted(int(size), words)
    with connection.cursor() as cursor:
        cursor.execute(
            f"EXPLAIN (FORMAT JSON) SELECT 1 FROM memories_memory m WHERE {where}", params
        )
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    size = max(size, int(plan[0]["Plan"]["Plan Rows"]))
    _large_sizes.put(key, size)
    return Counted(size, words)


def collection_size_get(*, project: Project, filters: SearchFilters) -> int:
    """How many memories pass the filters: counted up to the keyword query's budget
    (KEYWORD_MAX_MATCHES), past it the planner's estimate (at least the budget + 1),
    which is close enough to choose between an exact scan and the index. Counting a
    large set exactly costs more than the search it serves. A large set's estimate is
    kept for LARGE_SIZE_SECONDS in the process (an agent searches the same user turn
    after turn, and the count and the EXPLAIN were ~2.5 ms of each search of a user
    of 9,000 at 1M memories); a small set is counted every time (its count is BM25's
    exact collection size)."""
    return filtered_count(project=project, filters=filters).size


# large filtered sets' estimated sizes
LARGE_SIZE_SECONDS = 30.0
_large_sizes: Kept[int] = Kept(LARGE_SIZE_SECONDS)
