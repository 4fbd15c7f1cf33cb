"""Keyword candidates: BM25 over PostgreSQL full text.

PostgreSQL's ts_rank has no inverse document frequency, so a word found in half the
memories (a speaker's name, say) counts as much as a rare one: BM25 is computed here
instead, with OR semantics (a question rarely has all its words in one memory).

A memory's length is its text's size in bytes, against the mean over the filtered set.
Counting distinct lexemes instead (``length(tsvector)``) let a long text that repeats its
words pass for a short one, and a mean over the matching rows alone moved with each
query: on long conversation turns (BEAM) both put the keyword mode below plain BM25.
The byte size is read from the stored value's header (no decompression), so averaging
it over the filtered set is cheap, and it is not bounded like a tsvector's positions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import connection

from memories.config import SearchSettings
from memories.models import SEARCH_CONFIG, Project, keyword_document_sql, keyword_owner_token
from memories.providers.kept import Kept
from memories.services.search.filters import SearchFilters
from memories.services.search.kept import set_key
from memories.services.search.prepared import prepared_cursor

DOCUMENT = keyword_document_sql("m")  # what the GIN index memory_keyword_gin holds

# a query's words: each lexeme with its share of memories_memory rows per ANALYZE's
# most-common-lexeme statistics (None: not among them, so rarer than all of them)
QueryWords = list[tuple[str, float | None]]

# the columns query_words_read reads: the text's lexemes and the table's last ANALYZE
QUERY_WORDS_COLUMNS = f"""
    tsvector_to_array(to_tsvector('{SEARCH_CONFIG}', %(text)s)),
    (SELECT greatest(last_analyze, last_autoanalyze) FROM pg_stat_user_tables
     WHERE relid = 'memories_memory'::regclass)
"""

# The rows that hold query words: one SELECT per branch of the UNION, so the planner
# sees each tsquery; ``{branch}`` names each branch's parameters.
MATCHING_SQL = """(
    SELECT m.id, m.search_vector, octet_length(m.content) AS dl FROM memories_memory m
    WHERE {document} @@ %({branch}_tsquery)s::tsquery AND {where}
    LIMIT %({branch}_limit)s
)"""

BM25_SQL = """
WITH docs AS MATERIALIZED (
    SELECT DISTINCT ON (id) id, search_vector AS sv, dl FROM ({matching}) found
),
lengths AS MATERIALIZED ({lengths}),
terms AS MATERIALIZED (
    -- the query's lexemes picked out in C (to_tsvector gives every lexeme positions,
    -- all of weight D): unnesting a long turn's every lexeme to filter them cost 5x more
    SELECT d.id, d.dl, t.lexeme, coalesce(array_length(t.positions, 1), 1) AS tf
    FROM docs d
    CROSS JOIN LATERAL unnest(ts_filter(setweight(d.sv, 'A', %(lexemes)s), '{{a}}')) t
),
estimated AS (
    SELECT * FROM unnest(%(estimated_lexemes)s::text[], %(estimated_df)s::float8[])
    AS e(lexeme, df)
),
frequencies AS (
    SELECT t.lexeme, least(coalesce(max(e.df), count(*)), %(size)s)::float8 AS df
    FROM terms t LEFT JOIN estimated e USING (lexeme)
    GROUP BY t.lexeme
)
SELECT t.id, sum(
    ln(1 + (%(size)s - f.df + 0.5) / (f.df + 0.5))
    * t.tf * (%(k1)s + 1) / (t.tf + %(k1)s * (1 - %(b)s + %(b)s * t.dl / l.avgdl))
) AS score, (SELECT count(*) FROM docs) AS matched, max(l.avgdl) AS avgdl
FROM terms t JOIN frequencies f USING (lexeme), lengths l
GROUP BY t.id
ORDER BY score DESC, t.id  -- ties broken the same whatever the plan
LIMIT %(limit)s
"""

# the filtered set's mean length: read from the set's first KEYWORD_MAX_MATCHES rows, or
# given (a set larger than that whose mean a search of the last MEAN_LENGTH_SECONDS read)
MEAN_LENGTH_SQL = """
    SELECT greatest(avg(dl), 1)::float8 AS avgdl FROM (
        SELECT octet_length(m.content) AS dl FROM memories_memory m
        WHERE {where} LIMIT %(budget)s
    ) filtered
"""
MEAN_LENGTH_GIVEN_SQL = "SELECT %(avgdl)s::float8 AS avgdl"
# A set larger than KEYWORD_MAX_MATCHES has its mean length kept per process: reading its
# first rows' sizes was 4 of a 14 ms statement at a user of 100,000, and that mean, of a
# sample anyway, hardly moves between searches. Keyed by the set and its size (a changed
# size is a new set).
MEAN_LENGTH_SECONDS = 600
_mean_lengths: Kept[float] = Kept(MEAN_LENGTH_SECONDS)


def keyword_candidates(
    *,
    project: Project,
    text: str,
    filters: SearchFilters,
    limit: int,
    collection_size: int,
    policy: SearchSettings,
    words: QueryWords | None = None,
) -> list[tuple[Any, float]]:
    """(memory id, BM25 score) of memories sharing words with ``text``, best first,
    over the filtered set of ``collection_size`` rows (see ``collection_size_get``);
    ``words``: the text's, if read already (count.py).

    A filtered set of up to KEYWORD_MAX_MATCHES rows gets exact BM25 over every row
    holding a query word. In a larger one only that many rows are read: every row
    holding the rarest words, taken while their estimated rows (ANALYZE's lexeme
    statistics) fit that budget; only when those rows are fewer than ``limit`` or
    overflow the budget (the estimate was wrong), also the first rows holding all the
    words, and when too few the first holding the rarest of the rest. The rest's document
    frequencies are the estimates, and the mean length is that of the first
    KEYWORD_MAX_MATCHES rows of the set. The best BM25 scores come from the rare
    words; reading every row holding a common word is what made a search of a large
    project slow, and even the first rows holding one cost a walk of its whole posting
    list (a bitmap is built whole before a LIMIT applies: 11 ms for a name found in
    31,000 of a user's 100,000 memories).
    """
    words = query_words(text) if words is None else words
    if not words:
        return []
    plan = _word_plan(words, size=collection_size, limit=limit)
    if plan.selective and plan.common:
        # rows holding every word hold the rare ones too: read already, unless the
        # budget cut them off; the first rows of the rarest common word are a fallback
        found, matched = _bm25(project, filters, plan, policy, common_branches=False)
        if len(found) >= limit and matched < plan.budget:
            return found
        # too few rows: both branches; too many (the budget cut the rare words' rows
        # off): the rows holding every word, the best-scored the cut may have missed.
        # The first rows holding the common word alone cannot outscore the rare words'
        # rows, of which there are more than asked for (13 of a 42 ms statement at a
        # user of 100,000 whose "rare" word was common for them)
        return _bm25(
            project, filters, plan, policy, common_branches=True, rarest_common=len(found) < limit
        )[0]
    return _bm25(project, filters, plan, policy, common_branches=bool(plan.common))[0]


@dataclass
class _WordPlan:
    """A query's words in a filtered set of ``size`` rows: each one's estimated rows, the
    rare ones read whole (``selective``), the rest (``common``); the rows read at most
    (``budget``) and the candidates wanted (``limit``)."""

    estimates: dict[str, float]
    selective: list[str]
    common: list[str]
    size: int
    budget: int
    limit: int


def _word_plan(words: QueryWords, *, size: int, limit: int) -> _WordPlan:
    """The words' plan in a filtered set of ``size`` rows: each word's estimated rows
    (its share per ANALYZE; 0 when rarer than all it knows), the rarest of them read
    whole while they fit the KEYWORD_MAX_MATCHES budget."""
    budget = int(settings.RETRIEVAL["KEYWORD_MAX_MATCHES"])
    estimates = {lexeme: (frequency or 0.0) * size for lexeme, frequency in words}
    selective = _selective_words(estimates, size=size, budget=budget)
    taken = set(selective)  # a query may hold thousands of words: no list lookups
    return _WordPlan(
        estimates=estimates,
        selective=selective,
        common=[lexeme for lexeme in estimates if lexeme not in taken],
        size=size,
        budget=budget,
        limit=limit,
    )


def _bm25(
    project: Project,
    filters: SearchFilters,
    plan: _WordPlan,
    policy: SearchSettings,
    *,
    common_branches: bool,
    rarest_common: bool = True,
) -> tuple[list[tuple[Any, float]], int]:
    """The best ``plan.limit`` rows by BM25 among those the branches read (the common
    words' too with ``common_branches``; see _matching_sql), and how many rows they read."""
    matching, params = _matching_sql(
        project, filters, plan, common_branches=common_branches, rarest_common=rarest_common
    )
    where, _ = filters.sql(project)
    key = (set_key(project, filters), plan.size)
    known = _mean_lengths.get(key) if plan.size > plan.budget else None
    lengths = MEAN_LENGTH_SQL.format(where=where) if known is None else MEAN_LENGTH_GIVEN_SQL
    with prepared_cursor() as cursor:
        cursor.execute(
            BM25_SQL.format(matching=matching, lengths=lengths),
            {
                **params,
                "lexemes": list(plan.estimates),
                "estimated_lexemes": plan.common,
                "estimated_df": [plan.estimates[w] for w in plan.common],
                "size": plan.size,
                "budget": plan.budget,
                "k1": policy.bm25_k1,
                "b": policy.bm25_b,
                "limit": plan.limit,
                "avgdl": known,
            },
        )
        rows = cursor.fetchall()
    if rows and known is None and plan.size > plan.budget:
        _mean_lengths.put(key, float(rows[0][3]))
    return [(memory_id, float(score)) for memory_id, score, *_ in rows], (
        int(rows[0][2]) if rows else 0
    )


def mean_lengths_clear() -> None:
    """Forget the kept mean lengths (tests: the next test's database is another)."""
    _mean_lengths.clear()


def query_words(text: str) -> QueryWords:
    """The query's words (count.py reads them with the filtered set's size instead)."""
    with prepared_cursor() as cursor:
        cursor.execute(f"SELECT {QUERY_WORDS_COLUMNS}", {"text": text})
        return query_words_read(*cursor.fetchone())


def query_words_read(lexemes: list[str], analyzed: Any) -> QueryWords:
    """QUERY_WORDS_COLUMNS' values as the query's words."""
    shares = _lexeme_shares(analyzed)
    return [(lexeme, shares.get(lexeme)) for lexeme in lexemes]


# ANALYZE's most common lexemes of memories_memory with their shares of rows, read once
# per ANALYZE: parsing the 1,000-element statistics array took 1.6 ms of every search
_statistics: tuple[Any, dict[str, float]] = (None, {})


def _lexeme_shares(analyzed: Any) -> dict[str, float]:
    """Lexeme -> share of rows, as of the ANALYZE at ``analyzed`` (the table's last
    ANALYZE per its statistics counters, which a transaction sees as at its first read
    of them: a search inside a transaction sees a later ANALYZE only after it)."""
    global _statistics
    if _statistics[0] == analyzed and analyzed is not None:
        return _statistics[1]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs FROM pg_stats s
            WHERE s.schemaname = current_schema() AND s.tablename = 'memories_memory'
              AND s.attname = 'search_vector'
            """
        )
        row = cursor.fetchone()
    # the frequencies end with three more figures (minimum, maximum, null share)
    shares = dict(zip(row[0], row[1], strict=False)) if row and row[0] else {}
    _statistics = (analyzed, shares)
    return shares


def _selective_words(estimates: dict[str, float], *, size: int, budget: int) -> list[str]:
    """The rarest words, taken while their estimated rows fit the budget (all of them
    when the whole filtered set does). The rows are summed as they are taken, in the
    same order (a query's words are thousands when its text is a pasted document)."""
    selective: list[str] = []
    rows = 0.0
    for lexeme in sorted(estimates, key=estimates.__getitem__):
        if size > budget and rows + estimates[lexeme] > budget:
            break
        selective.append(lexeme)
        rows += estimates[lexeme]
    return selective


def _tsquery(lexemes: list[str], operator: str) -> str:
    return f" {operator} ".join("'" + lexeme.replace("'", "''") + "'" for lexeme in lexemes)


def _matching_sql(
    project: Project,
    filters: SearchFilters,
    plan: _WordPlan,
    *,
    common_branches: bool,
    rarest_common: bool = True,
) -> tuple[str, dict[str, Any]]:
    """The UNION of the rows to score: every row holding a selective word (up to the
    budget); with ``common_branches``, the first rows holding every word and (with
    ``rarest_common``) the first holding the rarest common word."""
    where, params = filters.sql(project)
    owner = _owner_tsquery(filters)
    if owner:
        # the owner token says whose rows they are; the end_user_id clause as well made
        # the planner AND the words' bitmap with the user's whole index (3 of a 10 ms
        # statement at a user of 100,000)
        where, _ = replace(filters, end_user_id=None, shared=False).sql(project)
    branches: list[tuple[str, int]] = []
    if plan.selective:
        branches.append((_tsquery(plan.selective, "|"), plan.budget))
    if common_branches and plan.common:
        branches.append((_tsquery(list(plan.estimates), "&"), plan.limit))
        if rarest_common or not plan.selective:
            branches.append((_tsquery(plan.common[:1], "|"), plan.limit))
    sql = []
    for number, (tsquery, rows) in enumerate(branches):
        branch = f"branch{number}"
        sql.append(MATCHING_SQL.format(branch=branch, where=where, document=DOCUMENT))
        params |= {f"{branch}_tsquery": owner + f"({tsquery})", f"{branch}_limit": rows}
    return " UNION ALL ".join(sql), params


def _owner_tsquery(filters: SearchFilters) -> str:
    """The owner token the matching rows must hold (and ...), when the filters name
    one owner: the index then reads that owner's postings (memories.models.memory)."""
    if filters.end_user_id is not None:
        return _tsquery([keyword_owner_token(filters.end_user_id)], "&") + " & "
    if filters.shared:
        return _tsquery([keyword_owner_token(None)], "&") + " & "
    return ""
