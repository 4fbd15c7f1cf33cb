"""Every list endpoint pages the same way (memories/api/pagination.py): one envelope
(`count`, `next_cursor`, `results`), pages that join into exactly the full list even
where rows tie on the ordering's first field, never another project's rows, and a bad
cursor of any kind is a 400 naming `cursor` that writes nothing."""

from __future__ import annotations

import base64
import json
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ingestion.models import Document
from memories.api.pagination import CURSOR_MAX_CHARS
from memories.api.users import BY_EXTERNAL_ID
from memories.models import (
    EndUser,
    MaintenanceRun,
    Memory,
    MemoryRevision,
    Project,
    Room,
    SettingsRevision,
)
from memories.services.pruning import PRUNE_TASK
from tests.memories.api.schema_walk import project_rows, rows_changed

ROWS = 7  # per tenant and list: pages of 3 make a short last page
BASE = datetime(2024, 1, 1, tzinfo=UTC)
MEMORY_ID = uuid.UUID("5b0c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d")  # in both projects
# external ids sort by the database's collation; the last is the longest cursor of ours
EXTERNAL_IDS = ["a", "B", "b b", "zoë", "Ω", "🙂", "🙂" * 255]


def tied(n: int) -> datetime:
    """Rows 0-2 share a moment, 3-5 the next...: the pk alone orders each group."""
    return BASE + timedelta(minutes=n // 3)


@dataclass
class Lists:
    """What a tenant's lists hold: its document (whose chunks are listed)."""

    document: Document


def lists_fill(project: Project) -> Lists:
    """ROWS rows of every listed kind in the project, tied on the ordering's first field;
    the revisions under MEMORY_ID, which the other project uses too."""
    Memory.objects.create(project=project, public_id=MEMORY_ID, content="parent", content_hash="p")
    documents = Document.objects.bulk_create(
        Document(
            project=project, source=f"d{n}.txt", sha256=f"{n}", chunker="x", created_at=tied(n)
        )
        for n in range(ROWS)
    )
    Memory.objects.bulk_create(
        Memory(
            project=project,
            kind=Memory.Kind.KNOWLEDGE,
            content=f"chunk {n}",
            content_hash=f"c{n}",
            document_id=documents[0].pk,
            chunk_index=n // 3,  # ties too
            created_at=tied(n),
        )
        for n in range(ROWS)
    )
    EndUser.objects.bulk_create(EndUser(project=project, external_id=i) for i in EXTERNAL_IDS)
    Room.objects.bulk_create(Room(project=project, external_id=i) for i in EXTERNAL_IDS)
    _histories_fill(project)
    return Lists(document=documents[0])


def _histories_fill(project: Project) -> None:
    MemoryRevision.objects.bulk_create(
        MemoryRevision(
            project=project,
            memory_id=MEMORY_ID,
            memory_public_id=MEMORY_ID,
            action="update",
            actor_type="system",
            actor="test",
            after={"n": n},
            created_at=tied(n),
        )
        for n in range(ROWS)
    )
    SettingsRevision.objects.bulk_create(
        SettingsRevision(
            project=project, actor_type="system", actor="test", after={"n": n}, created_at=tied(n)
        )
        for n in range(ROWS)
    )
    MaintenanceRun.objects.bulk_create(
        MaintenanceRun(project=project, task=PRUNE_TASK, status="ok", started_at=tied(n))
        for n in range(ROWS)
    )


@dataclass(frozen=True)
class Listing:
    """A list endpoint: its URL, its rows in order from the ORM, and a row's identity in
    its answer."""

    url: Callable[[Lists], str]
    expected: Callable[[Project, Lists], list[Any]]
    ident: Callable[[dict[str, Any]], Any]


def _ordered(rows: Any, *ordering: str, field: str = "public_id") -> list[Any]:
    return [str(value) for value in rows.order_by(*ordering).values_list(field, flat=True)]


NEWEST, OLDEST = ("-created_at", "-pk"), ("created_at", "pk")
LISTINGS = {
    "memories": Listing(
        lambda lists: "/api/v1/memories/",
        lambda project, lists: _ordered(Memory.objects.filter(project=project), *NEWEST),
        lambda item: item["id"],
    ),
    "memories oldest first": Listing(
        lambda lists: "/api/v1/memories/?order=asc",
        lambda project, lists: _ordered(Memory.objects.filter(project=project), *OLDEST),
        lambda item: item["id"],
    ),
    "documents": Listing(
        lambda lists: "/api/v1/documents/",
        lambda project, lists: _ordered(
            Document.objects.filter(project=project), *NEWEST, field="pk"
        ),
        lambda item: item["id"],
    ),
    "chunks": Listing(
        lambda lists: f"/api/v1/documents/{lists.document.pk}/chunks/",
        lambda project, lists: _ordered(
            Memory.objects.filter(project=project, document_id=lists.document.pk),
            *("chunk_index", "pk"),
        ),
        lambda item: item["id"],
    ),
    "users": Listing(
        lambda lists: "/api/v1/users/",
        lambda project, lists: _ordered(
            EndUser.objects.filter(project=project), "external_id", field="external_id"
        ),
        lambda item: item["external_id"],
    ),
    "rooms": Listing(
        lambda lists: "/api/v1/rooms/",
        lambda project, lists: _ordered(
            Room.objects.filter(project=project), "external_id", field="external_id"
        ),
        lambda item: item["external_id"],
    ),
    "memory revisions": Listing(
        lambda lists: f"/api/v1/memories/{MEMORY_ID}/revisions/",
        lambda project, lists: _ordered(
            MemoryRevision.objects.filter(project=project), *NEWEST, field="pk"
        ),
        lambda item: str(item["id"]),
    ),
    "settings revisions": Listing(
        lambda lists: "/api/v1/settings/revisions/",
        lambda project, lists: _ordered(
            SettingsRevision.objects.filter(project=project), *NEWEST, field="after"
        ),
        lambda item: str(item["after"]),
    ),
    "prune runs": Listing(
        lambda lists: "/api/v1/prune/runs/",
        lambda project, lists: _ordered(
            MaintenanceRun.objects.filter(project=project), "-started_at", "-pk", field="pk"
        ),
        lambda item: str(item["id"]),
    ),
}


@pytest.fixture
def filled(owner, outsider):
    """Both projects' lists filled alike (same external ids, same memory id), and
    knowledge of the outsider's that names the owner's document."""
    mine = lists_fill(owner.project)
    Memory.objects.bulk_create(
        Memory(
            project=outsider.project,
            kind=Memory.Kind.KNOWLEDGE,
            content=f"not a chunk of the owner's {n}",
            content_hash=f"o{n}",
            document_id=mine.document.pk,
            chunk_index=n,
        )
        for n in range(3)
    )
    return {owner: mine, outsider: lists_fill(outsider.project)}


def _with(url: str, **params: Any) -> str:
    separator = "&" if "?" in url else "?"
    return url + separator + "&".join(f"{name}={value}" for name, value in params.items())


def pages_walk(client: Any, url: str, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Every page of a list, following next_cursor: the pages' bodies and the count."""
    bodies, cursor = [], None
    while True:
        response = client.get(_with(url, limit=limit, **({"cursor": cursor} if cursor else {})))
        assert response.status_code == 200, response.content
        body = response.json()
        assert set(body) == {"count", "next_cursor", "results"}  # the one envelope
        bodies.append(body)
        cursor = body["next_cursor"]
        if cursor is None:
            return bodies, len(bodies)
        assert len(bodies) < 100, "the cursor does not advance"


@pytest.mark.parametrize("name", LISTINGS)
def test_pages_join_into_exactly_the_full_list_of_the_project(owner, outsider, filled, name):
    listing = LISTINGS[name]
    for tenant in (owner, outsider):
        lists = filled[tenant]
        expected = listing.expected(tenant.project, lists)
        assert len(expected) >= ROWS
        bodies, pages = pages_walk(tenant.client, listing.url(lists), limit=3)
        assert pages == math.ceil(len(expected) / 3)
        assert all(body["count"] == len(expected) for body in bodies)
        assert all(len(body["results"]) == 3 for body in bodies[:-1])
        seen = [listing.ident(item) for body in bodies for item in body["results"]]
        # no duplicates, no gaps, in order; the other project's like rows never appear
        assert seen == expected


def test_the_longest_external_id_fits_in_a_cursor(owner, filled):
    longest = EndUser.objects.get(project=owner.project, external_id="🙂" * 255)
    cursor = BY_EXTERNAL_ID.cursor_of(longest)
    assert len(cursor) <= CURSOR_MAX_CHARS
    expected = LISTINGS["users"].expected(owner.project, filled[owner])
    body = owner.client.get("/api/v1/users/", {"cursor": cursor}).json()
    after = expected[expected.index(longest.external_id) + 1 :]
    assert [user["external_id"] for user in body["results"]] == after


# --- bad cursors ---------------------------------------------------------------------------


def _b64(raw: str | bytes) -> str:
    data = raw.encode() if isinstance(raw, str) else raw
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _encoded(data: Any) -> str:
    return _b64(json.dumps(data))  # \u escapes: a lone surrogate gets through as one


def _decoded(cursor: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))  # type: ignore[no-any-return]


def _wrong_values(value: Any) -> list[Any]:
    """Values of the wrong type, or of the right type that no row can have."""
    wrong: list[Any] = [None, [value], {"v": value}, 1.5, True]
    if isinstance(value, int):
        return [*wrong, str(value), 2**63, -(2**63) - 1]
    wrong += [12345, "a\x00b", "\ud800"]
    if _parses(uuid.UUID, value):
        wrong.append("not-a-uuid")
    if _parses(datetime.fromisoformat, value):
        wrong += ["2024-01-01T00:00:00", "9999-12-31T23:59:59-14:00", "not a date"]
    return wrong


def _parses(parse: Callable[[str], Any], value: str) -> bool:
    try:
        parse(value)
    except ValueError:
        return False
    return True


def bad_cursors(real: str, other: str) -> dict[str, str]:
    """Cursors that are not cursors of this list, made from a real one (``real``) and a
    real one of a list in another order (``other``)."""
    data = _decoded(real)
    order, values = data["o"], data["v"]
    cases = {
        "empty": "",
        "not base64": "!!!",
        "base64 but not base64url": real[:-2] + "+/",
        "not JSON": _b64(b"\xff\xfe{"),
        "not UTF-8": _b64(b'{"o": "\xff"}'),
        "a JSON number": _b64("42"),
        "the values alone": _encoded(values),
        "no order": _encoded({"v": values}),
        "an extra key": _encoded({**data, "x": 1}),
        "one value short": _encoded({"o": order, "v": values[:-1]}),
        "one value more": _encoded({"o": order, "v": [*values, values[-1]]}),
        "made for another order": _encoded({"o": order + ",x", "v": values}),
        "another list's": other,
        "too long": _b64(json.dumps(data) + " " * CURSOR_MAX_CHARS),
        "a deep list": _b64("[" * 700 + "]" * 700),
    }
    for n, value in enumerate(values):
        for m, wrong in enumerate(_wrong_values(value)):
            wrong_values = [*values[:n], wrong, *values[n + 1 :]]
            cases[f"value {n} wrong ({m})"] = _encoded({"o": order, "v": wrong_values})
    return cases


def _first_cursor(client: Any, url: str) -> str:
    cursor = client.get(_with(url, limit=1)).json()["next_cursor"]
    assert cursor
    return cursor  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", LISTINGS)
def test_a_bad_cursor_is_a_400_naming_cursor_and_writes_nothing(owner, filled, name):
    lists = filled[owner]
    url = LISTINGS[name].url(lists)
    other_name = "memories" if name in ("users", "rooms") else "users"
    other = _first_cursor(owner.client, LISTINGS[other_name].url(lists))
    cases = bad_cursors(_first_cursor(owner.client, url), other)
    before = project_rows(owner.project)
    for case, cursor in cases.items():
        response = owner.client.get(url.split("?")[0], _query(url, cursor))
        assert response.status_code == 400, (case, response.content)
        assert response.json() == {"cursor": ["Invalid cursor."]}, case
    assert not rows_changed(before, project_rows(owner.project))


def _query(url: str, cursor: str) -> dict[str, str]:
    params = dict(part.split("=") for part in url.partition("?")[2].split("&") if part)
    return {**params, "cursor": cursor}


def test_a_cursor_of_one_order_is_refused_by_the_other(owner, filled):
    newest = _first_cursor(owner.client, "/api/v1/memories/")
    response = owner.client.get("/api/v1/memories/", {"cursor": newest, "order": "asc"})
    assert response.status_code == 400
    assert response.json() == {"cursor": ["Invalid cursor."]}
