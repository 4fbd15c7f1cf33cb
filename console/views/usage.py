"""The project's LLM usage page: the recorded LLM calls per day and purpose (calls,
tokens in and out, failures, retries), tokens per day as a chart, and this month's
tokens against the monthly token budget (console.services.usage)."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path

from console.paths import PROJECT
from console.services.usage import usage_page
from console.views.access import ConsoleRequest, project_view


@project_view()
def usage(request: ConsoleRequest) -> HttpResponse:
    """The last 30 days of the project's LLM calls and this month's budget."""
    page = usage_page(project=request.project)
    context = {
        "usage": page,
        "budget": page.budget,
        "chart": page.chart,
        # the meter turns amber past 75 % of the budget, red past 90 %
        "meter_low": page.budget.budget * 3 // 4,
        "meter_high": page.budget.budget * 9 // 10,
        "section": "usage",
    }
    return render(request, "console/usage.html", context)


urlpatterns: list[URLPattern] = [
    path(f"{PROJECT}usage/", usage, name="console-usage"),
]
