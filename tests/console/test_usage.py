"""The console's LLM usage page: the project's recorded LLM calls per day and purpose
(calls, tokens in/out, failures, retries), tokens per day as a chart, and this month
against the monthly token budget (spent: the offline methods run, said so); another
project's calls never shown; another project's page a 404."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from synopsis.models import LlmCall
from synopsis.services.llm_budget import month_bounds
from tests.console.operators import operator_client


@pytest.fixture
def viewer(owner):
    return operator_client("vic", project=owner.project, role="viewer")


def url(tenant):
    return reverse("console-usage", args=[tenant.project.pk])


def call(tenant, purpose, prompt, completion, *, status="ok", attempts=1, at=None):
    LlmCall.objects.create(
        project=tenant.project,
        purpose=purpose,
        model="stub-model",
        status=status,
        attempts=attempts,
        prompt_tokens=prompt,
        completion_tokens=completion,
        created_at=at or datetime.now(UTC),
    )


def budget_set(tenant, tokens):
    response = tenant.client.patch(
        "/api/v1/settings/", {"llm": {"monthly_token_budget": tokens}}, format="json"
    )
    assert response.status_code == 200


def row_of(html, table_id, purpose):
    table = html.split(f'id="{table_id}"')[1].split("</table>")[0]
    row = re.search(rf"<th scope=\"row\">{purpose}</th>(.*?)</tr>", table, re.S)
    assert row, f"no row {purpose}"
    return [int(n.replace(",", "")) for n in re.findall(r"<td[^>]*>([\d,]+)</td>", row[1])]


def test_calls_tokens_failures_and_retries_by_purpose(owner, outsider, viewer):
    call(owner, "summary", 100, 20)
    call(owner, "summary", 50, 10, attempts=3)
    call(owner, "facts", None, None, status="failed", attempts=2)
    call(owner, "facts", 30, 5, at=datetime.now(UTC) - timedelta(days=2))
    call(owner, "facts", 7000, 0, at=datetime.now(UTC) - timedelta(days=40))  # out of range
    call(outsider, "summary", 99_999, 1)  # another project's
    html = viewer.get(url(owner)).content.decode()
    # calls, tokens in, out, failures, retries
    assert row_of(html, "usage-purposes", "summary") == [2, 150, 30, 0, 2]
    assert row_of(html, "usage-purposes", "facts") == [2, 30, 5, 1, 1]
    assert "99,999" not in html and "99999" not in html
    assert 'aria-current="page">LLM usage' in html
    # the chart: today's bar says its tokens
    today = datetime.now(UTC)
    assert f"{today:%a %Y-%m-%d}: 180 tokens" in html
    assert "215 tokens in 30 days" in html
    days = html.split('id="usage-days"')[1].split("</table>")[0]
    assert days.count('class="day-first"') == 2  # today and two days ago


def test_the_days_past_the_seventh_fold(owner, viewer):
    now = datetime.now(UTC)
    for day in range(10):
        call(owner, "summary", 10, 1, at=now - timedelta(days=day))
    html = viewer.get(url(owner)).content.decode()
    assert html.split('id="usage-days"')[1].split("</table>")[0].count("day-first") == 7
    assert "3 older days with calls</summary>" in html
    assert html.split('id="usage-days-older"')[1].split("</table>")[0].count("day-first") == 3


def test_this_month_against_the_budget(owner, viewer):
    start, end = month_bounds()
    budget_set(owner, 1000)
    call(owner, "summary", 300, 100)
    call(owner, "summary", 5000, 0, at=start - timedelta(seconds=1))  # last month
    html = viewer.get(url(owner)).content.decode()
    assert 'data-spent="false"' in html and "600 left" in html
    assert f"starts over on {end:%Y-%m-%d}" in html
    assert "Budget spent" not in html


def test_a_spent_budget_says_the_offline_methods_run(owner, viewer):
    budget_set(owner, 300)
    call(owner, "facts", 300, 0)
    html = viewer.get(url(owner)).content.decode()
    assert 'data-spent="true"' in html
    assert "Budget spent" in html and "offline methods" in html


def test_no_calls_no_budget(owner, viewer):
    html = viewer.get(url(owner)).content.decode()
    assert "No LLM call was recorded" in html and "no limit" in html


def test_another_projects_page_is_a_404(owner, outsider):
    stranger = operator_client("sam", project=outsider.project)
    assert stranger.get(url(owner)).status_code == 404
