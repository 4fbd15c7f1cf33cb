"""Rate limits per API key: reads and writes apart, from the project's `limits`
settings, 429 with Retry-After and the JSON error body; Redis down lets requests pass."""

from __future__ import annotations

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from memories.api.throttling import (
    ApiKeyRateThrottle,
    seconds_until_allowed,
    sliding_count,
)
from memories.models import Memory
from memories.services.projects import api_key_create

pytestmark = pytest.mark.django_db
MEMORIES = "/api/v1/memories/"


@pytest.fixture(autouse=True)
def counting():
    """Each test starts with counting on (a Redis failure elsewhere pauses it)."""
    ApiKeyRateThrottle.paused_until = 0.0
    yield
    ApiKeyRateThrottle.paused_until = 0.0


def limit(tenant, **limits: int) -> None:
    tenant.project.settings = {"limits": limits}
    tenant.project.save(update_fields=["settings"])


def write(client: APIClient, n: int):
    return client.post(MEMORIES, {"user": "alice", "content": f"note {n}"})


def test_writes_over_the_limit_get_429_with_retry_after_and_store_nothing(owner):
    limit(owner, writes_per_minute=3)
    assert [write(owner.client, n).status_code for n in range(3)] == [201] * 3

    refused = write(owner.client, 3)

    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "throttled" in refused.json()["detail"].lower()
    assert Memory.objects.filter(project=owner.project).count() == 3
    # reads are counted apart: still allowed
    assert owner.client.get(MEMORIES).status_code == 200


def test_reads_over_the_limit_get_429_and_searches_count_as_reads(owner):
    limit(owner, reads_per_minute=2)
    assert owner.client.get(MEMORIES).status_code == 200
    search = owner.client.post("/api/v1/search/", {"query": "cats", "mode": "keyword"})
    assert search.status_code == 200, search.json()

    refused = owner.client.get(MEMORIES)

    assert refused.status_code == 429, refused.json()
    assert int(refused["Retry-After"]) >= 1
    assert write(owner.client, 0).status_code == 201  # writes have their own count


def test_each_api_key_has_its_own_count(owner):
    limit(owner, writes_per_minute=1)
    _, raw_key = api_key_create(project=owner.project, name="second")
    second = APIClient()
    second.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    assert write(owner.client, 0).status_code == 201
    assert write(owner.client, 1).status_code == 429

    assert write(second, 2).status_code == 201


def test_a_refused_request_does_not_count(owner):
    """A client retrying while refused is not kept out longer for it."""
    limit(owner, writes_per_minute=1)
    assert write(owner.client, 0).status_code == 201
    for n in range(5):
        assert write(owner.client, n).status_code == 429

    limit(owner, writes_per_minute=2)  # one more slot: the refused five took none of it
    assert write(owner.client, 9).status_code == 201


def test_zero_is_unlimited(owner):
    limit(owner, writes_per_minute=0, reads_per_minute=0)
    assert {write(owner.client, n).status_code for n in range(8)} == {201}


def test_another_projects_limits_do_not_apply(owner, outsider):
    limit(owner, writes_per_minute=1)
    assert write(owner.client, 0).status_code == 201
    assert write(owner.client, 1).status_code == 429

    assert {write(outsider.client, n).status_code for n in range(3)} == {201}


def test_limits_are_settings_with_ranges(owner):
    response = owner.client.get("/api/v1/settings/")
    body = response.json()
    assert body["values"]["limits"] == {"reads_per_minute": 1200, "writes_per_minute": 600}
    assert body["schema"]["limits"]["writes_per_minute"]["minimum"] == 0

    refused = owner.client.patch(
        "/api/v1/settings/", {"limits": {"writes_per_minute": -1}}, format="json"
    )
    assert refused.status_code == 400
    assert "limits.writes_per_minute" in str(refused.json())


def test_redis_down_lets_requests_through_without_5xx(owner, caplog):
    limit(owner, writes_per_minute=1, reads_per_minute=1)
    with override_settings(REDIS_URL="unix:///nonexistent/redis.sock"):
        statuses = [write(owner.client, n).status_code for n in range(3)]
        statuses += [owner.client.get(MEMORIES).status_code for _ in range(3)]

    assert statuses == [201] * 3 + [200] * 3
    assert "rate limits not enforced" in caplog.text
    assert ApiKeyRateThrottle.paused_until > 0  # Redis is not asked again for a while


def test_sliding_window_arithmetic():
    # half of the last minute's 100 still lies within the last 60 s
    assert sliding_count(previous=100, current=10, elapsed=30.0) == 60.0
    # this minute alone is full: wait for the next one
    assert seconds_until_allowed(previous=0, current=5, elapsed=20.0, rate=5) == 40
    # 10 + 100 x (1 - t/60) + 1 <= 60 once t >= 30.6 s
    assert seconds_until_allowed(previous=100, current=10, elapsed=20.0, rate=60) == 11
