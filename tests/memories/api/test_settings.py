"""GET/PATCH /api/v1/settings/ and its revisions: the per-project configuration."""

from __future__ import annotations

import pytest

from memories.config import settings_schema
from memories.models import Project, SettingsRevision
from memories.services.configuration import project_settings_get

URL = "/api/v1/settings/"
REVISIONS = "/api/v1/settings/revisions/"


def test_a_new_project_reads_the_defaults_with_the_schema(owner):
    response = owner.read_client.get(URL)
    assert response.status_code == 200
    body = response.json()
    assert body["overrides"] == {}
    assert body["values"] == body["defaults"]
    assert body["values"]["search"]["default_mode"] == "auto"
    assert body["values"]["search"]["keyword_weight"] == 0.5
    entry = body["schema"]["search"]["keyword_weight"]
    assert (entry["type"], entry["minimum"], entry["maximum"]) == ("number", 0.0, 1.0)
    assert entry["description"]
    assert body["schema"] == settings_schema()


def test_patch_changes_only_what_it_names_and_is_recorded(owner):
    response = owner.client.patch(URL, {"search": {"keyword_weight": 0.8, "rrf_k": 40}})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["overrides"] == {"search": {"keyword_weight": 0.8, "rrf_k": 40}}
    assert body["values"]["search"]["keyword_weight"] == 0.8
    assert body["values"]["search"]["neighbour_weight"] == 0.3  # untouched: the default
    owner.project.refresh_from_db()
    assert project_settings_get(project=owner.project).search.rrf_k == 40
    [revision] = owner.read_client.get(REVISIONS).json()["results"]
    assert revision["actor_type"] == "api_key"
    assert revision["actor"] == owner.key.prefix
    assert (revision["before"], revision["after"]) == ({}, body["overrides"])


def test_null_puts_a_setting_back_to_its_default(owner):
    owner.client.patch(URL, {"search": {"keyword_weight": 0.8, "rrf_k": 40}})
    body = owner.client.patch(URL, {"search": {"keyword_weight": None}}).json()
    assert body["overrides"] == {"search": {"rrf_k": 40}}
    assert body["values"]["search"]["keyword_weight"] == 0.5
    body = owner.client.patch(URL, {"search": None}).json()
    assert body["overrides"] == {}
    assert len(owner.client.get(REVISIONS).json()["results"]) == 3


def test_a_patch_that_changes_nothing_records_nothing(owner):
    owner.client.patch(URL, {"search": {"rrf_k": 40}})
    owner.client.patch(URL, {"search": {"rrf_k": 40}})
    assert SettingsRevision.objects.filter(project=owner.project).count() == 1


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"search": {"keyword_weight": 1.5}}, "search.keyword_weight", "at most 1.0"),
        ({"search": {"keyword_weight": "high"}}, "search.keyword_weight", "a number"),
        ({"search": {"rrf_k": 2.5}}, "search.rrf_k", "an integer"),
        ({"search": {"rrf_k": True}}, "search.rrf_k", "an integer"),
        ({"search": {"default_mode": "magic"}}, "search.default_mode", "one of"),
        ({"search": {"keyword_wieght": 0.2}}, "search.keyword_wieght", "Unknown setting"),
        ({"serch": {"keyword_weight": 0.2}}, "serch", "Unknown section"),
        ({"search": 3}, "search", "object"),
        (
            {"search": {"recency_weight": 0.7, "importance_weight": 0.5}},
            "search.importance_weight",
            "at most 1",
        ),
    ],
)
def test_a_bad_setting_is_a_400_naming_it_and_writes_nothing(owner, body, field, message):
    owner.client.patch(URL, {"search": {"rrf_k": 40}})
    response = owner.client.patch(URL, body)
    assert response.status_code == 400
    assert message in " ".join(response.json()[field])
    owner.project.refresh_from_db()
    assert owner.project.settings == {"search": {"rrf_k": 40}}
    assert SettingsRevision.objects.filter(project=owner.project).count() == 1


def test_one_bad_setting_among_good_ones_writes_none_of_them(owner):
    response = owner.client.patch(URL, {"search": {"rrf_k": 40, "bm25_b": 7}})
    assert response.status_code == 400
    assert list(response.json()) == ["search.bm25_b"]
    owner.project.refresh_from_db()
    assert owner.project.settings == {}


def test_a_body_that_is_not_an_object_is_a_400(owner):
    response = owner.client.patch(URL, [1, 2], format="json")
    assert response.status_code == 400
    assert "settings" in response.json()


def test_a_read_only_key_may_read_but_not_change(owner):
    assert owner.read_client.get(URL).status_code == 200
    assert owner.read_client.patch(URL, {"search": {"rrf_k": 40}}).status_code == 403
    owner.project.refresh_from_db()
    assert owner.project.settings == {}


def test_no_key_no_settings(anonymous, owner):
    assert anonymous.get(URL).status_code == 401
    assert anonymous.patch(URL, {"search": {"rrf_k": 40}}).status_code == 401
    assert anonymous.get(REVISIONS).status_code == 401


def test_each_project_has_its_own_settings_and_history(owner, outsider):
    owner.client.patch(URL, {"search": {"rrf_k": 40}})
    assert outsider.client.get(URL).json()["overrides"] == {}
    assert outsider.client.get(REVISIONS).json()["results"] == []
    outsider.client.patch(URL, {"search": {"rrf_k": 7}})
    assert owner.client.get(URL).json()["overrides"] == {"search": {"rrf_k": 40}}
    assert len(owner.client.get(REVISIONS).json()["results"]) == 1


def test_a_stored_value_that_no_longer_validates_falls_back_to_its_default(owner):
    # e.g. a setting narrowed or removed by an upgrade, or a row edited by hand
    Project.objects.filter(pk=owner.project.pk).update(
        settings={"search": {"keyword_weight": 9, "rrf_k": 40, "gone": 1}, "old": {}}
    )
    body = owner.client.get(URL).json()
    assert body["values"]["search"]["keyword_weight"] == 0.5
    assert body["values"]["search"]["rrf_k"] == 40
    # and the next change starts from the valid part
    body = owner.client.patch(URL, {"search": {"bm25_b": 0.5}}).json()
    assert body["overrides"] == {"search": {"rrf_k": 40, "bm25_b": 0.5}}
