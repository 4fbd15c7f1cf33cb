"""The structured kinds: a fact's category, a relationship's triple, a goal's status and
due date, validated on write and usable as list filters."""

from __future__ import annotations

import pytest

URL = "/api/v1/memories/"


def write(tenant, **fields):
    response = tenant.client.post(URL, {"user": "maria", **fields}, format="json")
    if response.status_code == 201:
        response.memory = response.json()["memory"]
    return response


def test_a_relationship_and_a_goal_are_stored_normalized(owner):
    relationship = write(
        owner,
        kind="relationship",
        content="Maria's sister is Ana",
        content_json={"subject": " Maria ", "predicate": "sister", "object": "Ana"},
    )
    assert relationship.status_code == 201, relationship.json()
    assert relationship.memory["content_json"] == {
        "subject": "Maria",
        "predicate": "sister",
        "object": "Ana",
    }
    goal = write(owner, kind="goal", content="Run a marathon", content_json={"due": "2027-04-01"})
    assert goal.memory["content_json"] == {"status": "open", "due": "2027-04-01"}


@pytest.mark.parametrize(
    ("kind", "content_json", "key"),
    [
        ("fact", {"category": "hobbies"}, "category"),
        ("fact", {"slot": ""}, "slot"),
        ("relationship", {"subject": "Maria", "predicate": "sister"}, "object"),
        ("relationship", {"subject": "", "predicate": "sister", "object": "Ana"}, "subject"),
        ("relationship", {"subject": "M", "predicate": 3, "object": "Ana"}, "predicate"),
        ("goal", {"status": "paused"}, "status"),
        ("goal", {"due": "next spring"}, "due"),
        ("goal", {"due": 20270401}, "due"),
    ],
)
def test_bad_structured_content_is_400_naming_the_key_and_writes_nothing(
    owner, kind, content_json, key
):
    response = write(owner, kind=kind, content="x", content_json=content_json)
    assert response.status_code == 400
    assert key in response.json()["content_json"], response.json()
    assert owner.client.get("/api/v1/memories/count/").json()["count"] == 0


def test_a_patch_is_checked_against_the_memorys_kind(owner):
    goal = write(owner, kind="goal", content="Learn Portuguese").memory
    bad = owner.client.patch(
        f"{URL}{goal['id']}/", {"content_json": {"status": "maybe"}}, format="json"
    )
    assert bad.status_code == 400 and "status" in bad.json()["content_json"]
    done = owner.client.patch(
        f"{URL}{goal['id']}/", {"content_json": {"status": "done"}}, format="json"
    )
    assert done.status_code == 200
    assert done.json()["content_json"] == {"status": "done", "due": None}


def test_list_filters_on_the_structured_fields(owner, outsider):
    write(owner, kind="goal", content="Run a marathon")
    done = write(owner, kind="goal", content="Quit sugar", content_json={"status": "done"})
    write(
        owner, kind="fact", content="Maria lives in Lisbon", content_json={"category": "location"}
    )
    write(owner, kind="fact", content="Maria likes jazz", content_json={"category": "preference"})
    write(
        owner,
        kind="relationship",
        content="Maria's sister is Ana",
        content_json={"subject": "Maria", "predicate": "sister", "object": "Ana"},
    )
    write(outsider, kind="goal", content="Someone else's goal", content_json={"status": "done"})

    def contents(**params):
        return [m["content"] for m in owner.client.get(URL, params).json()["results"]]

    assert contents(kind="goal", goal_status="done") == ["Quit sugar"]
    assert done.memory["content_json"]["status"] == "done"
    assert contents(kind="goal", goal_status="open") == ["Run a marathon"]
    assert contents(kind="fact", category="location") == ["Maria lives in Lisbon"]
    assert contents(predicate="sister") == ["Maria's sister is Ana"]
    assert owner.client.get(URL, {"goal_status": "paused"}).status_code == 400
