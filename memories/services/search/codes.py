"""A large user's binary codes kept in the web process, for the compact scan.

The compact scan (compact.py) compares the query with every window of one user by the
Hamming distance of their binary quantizations. In PostgreSQL that reads the user's
rows of the ``embedding_owner_bits`` index and sorts them: ~3 ms for 10,000 windows,
~17 ms for 100,000. The same comparison over the codes held in numpy takes 0.3 and
~5 ms. So a user of at least RETRIEVAL_CODES_MIN_ROWS windows has their codes loaded
once into the process (on a thread of its own, while searches go on through the
database), and later searches send the database the shortlist's memories instead of
asking it to find them. Here the shortlist is ranked better than the database can:
the windows nearest by Hamming distance are ranked again by the query's float values
against their bits (``OwnerCodes.scores``), so fewer windows go to the float re-rank
(RETRIEVAL_CODES_SHORTLIST_*) for a recall at least that of the database's longer
Hamming shortlist.

Kept correct without asking the database whether anything changed:

* The load reads the codes and ``pg_snapshot_xmin`` in one REPEATABLE READ snapshot.
  Every transaction below that xmin had finished, so its rows were loaded; each row
  records its writer's transaction id (``xid``, migration 0014), and the rows of
  transactions at or past the xmin, the only ones the load may have missed (new
  embeddings, replaced windows, memories moved to this user), are read from the index
  with each search and ranked beside the cached codes (``delta``).
* A cached window whose memory has since been deleted, re-embedded or moved away
  costs a place in the shortlist, nothing else: the shortlist is re-ranked by the
  float vectors the database holds now, and checked against the filters.
* The codes are loaded again after RETRIEVAL_CODES_SECONDS, or sooner once the rows
  read again pass DELTA_RELOAD_ROWS.

At most RETRIEVAL_CODES_MAX_WINDOWS windows are kept per process (64 bytes each for
384 dimensions; 0 turns the cache off). An owner is loaded from its second search on,
into the room left, or made by dropping owners searched less often (the counts halve
every HALVING_SEARCHES searches); never by dropping one searched as often, so a
project with more large users than fit does not load one and drop another with each
search: those kept stay, the others are scanned in the database as before.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from memories.providers.heap import heap_trim

# rows read again from the database with each search past which the codes are reloaded
DELTA_RELOAD_ROWS = 1_000
# rows turned into arrays at a time when loading
LOAD_ROWS = 10_000
# an owner's codes are loaded from its second search on (one search does not pay a
# load), and the searches counted are halved every HALVING_SEARCHES searches
ADMIT_SEARCHES = 2
HALVING_SEARCHES = 1_000
# the windows nearest by Hamming distance that the asymmetric score ranks, per window
# of the shortlist
HAMMING_PREFILTER = 8
# each byte value's 8 bits, first dimension the highest bit (as query_words packs them)
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.float32)

Owner = tuple[int, int, int | None]  # (space, project, end user; None: shared memories)


@dataclass
class OwnerCodes:
    """One owner's windows: ``ids[i]`` (a memory id's 16 bytes) holds ``codes[:, i]``
    (the binary quantization as 64-bit words, one row per word: each word's XOR and
    popcount is one pass over contiguous memory, 0.9 ms for 100,000 windows against
    3.3 with a row per window); rows of transactions from ``xmin`` on are read again
    from the database."""

    ids: np.ndarray = field(repr=False)
    codes: np.ndarray = field(repr=False)
    xmin: int
    loaded_at: float = field(default_factory=time.monotonic)

    def nearest(self, query: np.ndarray, count: int) -> list[bytes]:
        """The memory ids (16 bytes each, in no order) of the ``count`` windows nearest to
        the query's float vector: the HAMMING_PREFILTER x ``count`` nearest by Hamming
        distance (both sides binary), ranked by ``scores`` (the query's own values
        against the windows' bits), the best ``count`` kept."""
        if count >= len(self.ids):
            return list(dict.fromkeys(self.ids.tolist()))
        prefilter = count * HAMMING_PREFILTER
        chosen = (
            np.argpartition(self.distances(query_words(query)), prefilter)[:prefilter]
            if prefilter < len(self.ids)
            else np.arange(len(self.ids))
        )
        best = chosen[np.argpartition(-self.scores(query, chosen), count)[:count]]
        return list(dict.fromkeys(self.ids[best].tolist()))

    def distances(self, query_words: np.ndarray) -> np.ndarray:
        """Each window's Hamming distance to the query (pgvector's ``<~>``)."""
        distances = np.zeros(len(self.ids), dtype=np.uint16)
        scratch = np.empty(len(self.ids), dtype=np.uint64)
        for word, value in zip(self.codes, query_words, strict=True):
            distances += np.bitwise_count(np.bitwise_xor(word, value, out=scratch))
        return distances

    def scores(self, query: np.ndarray, chosen: np.ndarray) -> np.ndarray:
        """The asymmetric similarity of the ``chosen`` windows: the sum of the query's
        values where a window's bit is 1 (the query's dot product with the bits; higher
        is nearer). It keeps what binarizing the query throws away, how far each value
        is from 0, and ranks the windows much as their float vectors do: the shortlist
        can be half as long for the same recall (BENCHMARKS.md). A table of each byte
        value's partial sum per byte position; each window sums its bytes' entries."""
        positions = self.codes.shape[0] * 8
        padded = np.zeros(positions * 8, dtype=np.float32)
        padded[: len(query)] = query
        table = padded.reshape(positions, 8) @ _BYTE_BITS.T  # (positions, 256)
        data = np.ascontiguousarray(self.codes[:, chosen].T, dtype=">u8").view(np.uint8)
        return table[np.arange(positions), data].sum(axis=1)


_lock = threading.Lock()
_owners: dict[Owner, OwnerCodes] = {}
_loading: dict[Owner, threading.Thread] = {}
_searches: Counter[Owner] = Counter()  # per owner, halved every HALVING_SEARCHES
_counted = 0


def codes_apply(size: int) -> bool:
    """Whether an owner of ``size`` rows has its codes kept in the process. Never
    inside a transaction (a test's, or a command's): it may have written rows of the
    owner the database will not show another transaction yet, so the scan stays there."""
    retrieval = settings.RETRIEVAL
    limit = int(retrieval["CODES_MAX_WINDOWS"])
    return limit > 0 and int(retrieval["CODES_MIN_ROWS"]) <= size and not connection.in_atomic_block


def owner_codes_get(owner: Owner, size: int) -> OwnerCodes | None:
    """The owner's codes if loaded (an expired load serves until the next replaces
    it); a load is started in the background when they are missing or expired and the
    owner (of ``size`` rows) is admitted (see ``_admitted``). The caller scans in the
    database meanwhile."""
    with _lock:
        _search_count(owner)
        codes = _owners.get(owner)
        expired = codes is not None and (
            time.monotonic() - codes.loaded_at >= float(settings.RETRIEVAL["CODES_SECONDS"])
        )
        if owner not in _loading and (expired or (codes is None and _admitted(owner, size))):
            _load_start(owner)
        return codes


def owner_codes_stale(owner: Owner) -> None:
    """Too many of the owner's rows are read again with each search: load anew."""
    with _lock:
        if owner not in _loading and owner in _owners:
            _load_start(owner)


def query_words(query: np.ndarray) -> np.ndarray:
    """The query's binary quantization (pgvector ``binary_quantize``: 1 where > 0) as
    the 64-bit words the codes are held in, first dimension the highest bit."""
    bits = np.packbits(np.asarray(query) > 0)
    bits = np.concatenate([bits, np.zeros(-len(bits) % 8, dtype=np.uint8)])
    return bits.view(">u8").astype(np.uint64)


def codes_loads_wait() -> None:
    """Return once the loads under way have ended."""
    with _lock:
        threads = list(_loading.values())
    for thread in threads:
        thread.join()


def codes_clear() -> None:
    """Forget every owner's codes, after the loads under way end (tests: a database
    flushed between tests must not be answered from an earlier one's codes, and a
    loading thread's connection would keep the test database from being dropped)."""
    codes_loads_wait()
    global _counted
    with _lock:
        _owners.clear()
        _searches.clear()
        _counted = 0


def _search_count(owner: Owner) -> None:
    """Count a search of ``owner``; every HALVING_SEARCHES searches all counts halve, so
    they follow what is searched now (``_lock`` held)."""
    global _counted
    _searches[owner] += 1
    _counted += 1
    if _counted >= HALVING_SEARCHES:
        _counted = 0
        for key, count in list(_searches.items()):
            if count > 1:
                _searches[key] = count // 2
            else:
                del _searches[key]


def _admitted(owner: Owner, size: int) -> bool:
    """Whether ``owner`` (at least ``size`` windows) is loaded: once searched
    ADMIT_SEARCHES times, into the room left by the owners kept, or made by dropping
    owners searched less often than it (``_lock`` held). Never by dropping an owner
    searched as often: when more owners are searched alike than the process keeps,
    those kept stay, rather than each search loading one and dropping another."""
    limit = int(settings.RETRIEVAL["CODES_MAX_WINDOWS"])
    wanted = _searches[owner]
    if wanted < ADMIT_SEARCHES or size > limit:
        return False
    room = limit - sum(len(codes.ids) for codes in _owners.values())
    dropped = []
    for kept in sorted(_owners, key=lambda key: _searches[key]):
        if room >= size or _searches[kept] >= wanted:
            break
        room += len(_owners[kept].ids)
        dropped.append(kept)
    if room < size:
        return False
    for kept in dropped:
        del _owners[kept]
    return True


def _load_start(owner: Owner) -> None:
    """Start loading ``owner``'s codes (``_lock`` held, no load of it under way)."""
    thread = threading.Thread(target=_load, args=(owner,), name=f"codes-{owner[2]}", daemon=True)
    _loading[owner] = thread
    thread.start()


def _load(owner: Owner) -> None:
    try:
        codes = _codes_read(owner)
        with _lock:
            # room was made for the owner's rows when it was admitted; more windows
            # than rows (long memories) may overshoot the limit by the difference
            _owners[owner] = codes
        heap_trim()  # the rows read in parts: 14 MiB kept after 100,000 windows
    finally:
        connection.close()
        with _lock:
            _loading.pop(owner, None)


def _codes_read(owner: Owner) -> OwnerCodes:
    """The owner's codes and the snapshot's xmin, read in one snapshot."""
    space_id, project_id, end_user_id = owner
    with connection.cursor() as cursor:
        cursor.execute("SELECT dimension FROM memories_embeddingspace WHERE id = %s", [space_id])
        words = -(-int(cursor.fetchone()[0]) // 64)
    columns = ", ".join(
        f"substring(bits FROM {1 + 64 * word} FOR 64)::bit(64)::bigint" for word in range(words)
    )
    owner_sql = "end_user_id IS NULL" if end_user_id is None else "end_user_id = %(user)s"
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
            xmin = int(cursor.fetchone()[0])
        return _rows_read(owner_sql, columns, owner, words, xmin)


def _rows_read(owner_sql: str, columns: str, owner: Owner, words: int, xmin: int) -> OwnerCodes:
    """The rows, in parts through a server-side cursor. For 100,000 windows (6.4 MB
    kept, ~0.45 s): fetched at once they raised the process's peak RSS by 92 MB; in
    parts of LOAD_ROWS the load allocates at most 16 MB (tracemalloc)."""
    space_id, project_id, end_user_id = owner
    with connection.chunked_cursor() as cursor:
        cursor.execute(
            f"SELECT memory_id, {columns} FROM memories_embedding_bits "
            f"WHERE space_id = %(space)s AND project_id = %(project)s AND {owner_sql}",
            {"space": space_id, "project": project_id, "user": end_user_id},
        )
        ids: list[np.ndarray] = [np.empty(0, dtype="V16")]
        codes: list[np.ndarray] = [np.empty((0, words), dtype=np.int64)]
        while rows := cursor.fetchmany(LOAD_ROWS):
            ids.append(np.array([row[0].bytes for row in rows], dtype="V16"))
            codes.append(np.array([row[1:] for row in rows], dtype=np.int64))
    words_first = np.ascontiguousarray(np.concatenate(codes).view(np.uint64).T)
    return OwnerCodes(ids=np.concatenate(ids), codes=words_first, xmin=xmin)
