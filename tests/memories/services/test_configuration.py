"""project_settings_get / project_settings_update and the schema behind them."""

from __future__ import annotations

import pytest

from memories.config import (
    SearchSettings,
    SettingsError,
    settings_from_overrides,
    settings_schema,
)
from memories.models import Project, SettingsRevision
from memories.services.configuration import project_settings_get, project_settings_update
from memories.services.revisions import Actor

ACTOR = Actor.system("test")


def test_every_setting_has_a_type_a_default_and_a_description():
    for section, entries in settings_schema().items():
        for name, entry in entries.items():
            assert entry["type"] in {"integer", "number", "string", "boolean"}, name
            assert entry["description"].strip(), f"{section}.{name}"
            if "minimum" in entry:
                assert entry["minimum"] <= entry["default"] <= entry["maximum"], name
            if "choices" in entry:
                assert entry["default"] in entry["choices"], name


def test_a_change_is_seen_by_every_reader_of_the_row(owner):
    # another process holds its own Project instance; it reads the row per request/task
    elsewhere = Project.objects.get(pk=owner.project.pk)
    assert project_settings_get(project=elsewhere).search.rrf_k == 60
    project_settings_update(project=owner.project, changes={"search": {"rrf_k": 30}}, actor=ACTOR)
    elsewhere.refresh_from_db()
    assert project_settings_get(project=elsewhere).search.rrf_k == 30


def test_equal_overrides_share_one_parsed_settings_object():
    first = settings_from_overrides({"search": {"rrf_k": 30, "bm25_b": 0.5}})
    second = settings_from_overrides({"search": {"bm25_b": 0.5, "rrf_k": 30}})
    assert first is second
    assert settings_from_overrides({}).search == SearchSettings()


def test_replace_makes_the_given_overrides_the_whole_of_them(owner):
    project_settings_update(project=owner.project, changes={"search": {"rrf_k": 30}}, actor=ACTOR)
    project_settings_update(
        project=owner.project, changes={"search": {"bm25_k1": 2.0}}, actor=ACTOR, replace=True
    )
    owner.project.refresh_from_db()
    assert owner.project.settings == {"search": {"bm25_k1": 2.0}}
    revision = SettingsRevision.objects.filter(project=owner.project).latest("created_at")
    assert (revision.before, revision.after) == (
        {"search": {"rrf_k": 30}},
        {"search": {"bm25_k1": 2.0}},
    )
    assert (revision.actor_type, revision.actor) == ("system", "test")


def test_a_bad_change_raises_naming_every_bad_setting_and_writes_nothing(owner):
    with pytest.raises(SettingsError) as caught:
        project_settings_update(
            project=owner.project,
            changes={"search": {"rrf_k": 0, "keyword_weight": -1, "neighbour_weight": 0.2}},
            actor=ACTOR,
        )
    assert set(caught.value.errors) == {"search.rrf_k", "search.keyword_weight"}
    owner.project.refresh_from_db()
    assert owner.project.settings == {}
    assert not SettingsRevision.objects.exists()
