"""System checks."""

from django.core import checks


def test_a_ranking_variable_left_in_the_environment_is_reported(monkeypatch):
    assert not [m for m in checks.run_checks() if m.id == "memories.W001"]
    monkeypatch.setenv("RETRIEVAL_AUTO_KEYWORD_WEIGHT", "0.7")
    [warning] = [m for m in checks.run_checks() if m.id == "memories.W001"]
    assert "RETRIEVAL_AUTO_KEYWORD_WEIGHT" in warning.msg
    assert "search.keyword_weight" in warning.hint
