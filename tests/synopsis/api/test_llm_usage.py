"""GET /api/v1/llm-usage/: the project's LLM tokens this month against its monthly token
budget, read with the project's key (read-only keys too); another project's calls are
never counted or shown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from synopsis.models import LlmCall
from synopsis.services.llm_budget import month_bounds

URL = "/api/v1/llm-usage/"


def spend(tenant, prompt, completion, *, at=None):
    LlmCall.objects.create(
        project=tenant.project,
        purpose="facts",
        model="stub-model",
        status="ok",
        prompt_tokens=prompt,
        completion_tokens=completion,
        created_at=at or datetime.now(UTC),
    )


def test_the_months_tokens_against_the_budget(owner, outsider, settings):
    settings.LLM = {**settings.LLM, "BASE_URL": "http://127.0.0.1:9/v1"}
    start, end = month_bounds()
    spend(owner, 300, 50)
    spend(owner, 1000, 0, at=start - timedelta(minutes=1))  # last month: not counted
    LlmCall.objects.create(project=owner.project, purpose="summary", model="m", status="failed")
    spend(outsider, 90_000, 0)  # another project's: never counted
    patch = owner.client.patch(
        "/api/v1/settings/", {"llm": {"monthly_token_budget": 1000}}, format="json"
    )
    assert patch.status_code == 200
    response = owner.read_client.get(URL)
    assert response.status_code == 200, response.json()
    assert response.json() == {
        "month": f"{start:%Y-%m}",
        "tokens": 350,
        "budget": 1000,
        "remaining": 650,
        "spent": False,
        "resets_at": end.isoformat().replace("+00:00", "Z"),
        "llm_configured": True,
    }


def test_a_spent_budget_says_so(owner):
    owner.client.patch("/api/v1/settings/", {"llm": {"monthly_token_budget": 100}}, format="json")
    spend(owner, 80, 20)
    body = owner.client.get(URL).json()
    assert (body["tokens"], body["spent"], body["remaining"]) == (100, True, 0)


def test_no_budget_no_calls(outsider, owner):
    spend(owner, 500, 500)
    body = outsider.client.get(URL).json()
    assert (body["tokens"], body["budget"], body["remaining"], body["spent"]) == (0, 0, None, False)


def test_without_a_key_401(anonymous):
    assert anonymous.get(URL).status_code == 401


def test_it_is_in_the_schema(owner):
    schema = owner.client.get("/api/schema/?format=json").json()
    operation = schema["paths"][URL]["get"]
    assert set(schema["paths"][URL]) == {"get"}
    assert "200" in operation["responses"]
