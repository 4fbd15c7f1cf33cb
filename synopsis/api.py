"""The project's LLM usage this month against its monthly token budget
(synopsis/services/llm_budget.py): GET /api/v1/llm-usage/, read-only, scoped to the
API key's project. ``urlpatterns`` is included under /api/v1/."""

from __future__ import annotations

from django.conf import settings
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api.scoping import project_of
from synopsis.services.llm_budget import llm_budget_get


class LlmUsageOutputSerializer(serializers.Serializer):
    month = serializers.CharField(help_text="The calendar month counted (UTC), YYYY-MM.")
    tokens = serializers.IntegerField(
        help_text="Prompt + completion tokens of the project's recorded LLM calls this "
        "month (a failed call without a usage counts 0)."
    )
    budget = serializers.IntegerField(
        help_text="The setting `llm.monthly_token_budget`; 0: no limit."
    )
    remaining = serializers.IntegerField(
        allow_null=True, help_text="Tokens left this month; null without a limit."
    )
    spent = serializers.BooleanField(
        help_text="The budget is reached: until `resets_at` the workers summarize, extract "
        "facts and write synopses with the offline methods (writes never fail)."
    )
    resets_at = serializers.DateTimeField(
        help_text="When the count starts over: the first of next month, 00:00 UTC."
    )
    llm_configured = serializers.BooleanField(
        help_text="An LLM endpoint is configured on the server (LLM_BASE_URL); without "
        "one the offline methods run whatever the budget."
    )


@extend_schema(tags=["settings"])
class LlmUsageView(APIView):
    @extend_schema(responses=LlmUsageOutputSerializer)
    def get(self, request: Request) -> Response:
        """The project's LLM tokens this month, its monthly token budget, whether it is
        spent (the workers then use the offline methods) and when it resets."""
        project = project_of(request)
        project.refresh_from_db(fields=["settings"])  # the key's project may be cached
        usage = llm_budget_get(project=project, cached=False)
        data = {
            "month": f"{usage.month_start:%Y-%m}",
            "tokens": usage.tokens,
            "budget": usage.budget,
            "remaining": usage.remaining,
            "spent": usage.spent,
            "resets_at": usage.resets_at,
            "llm_configured": bool(settings.LLM.get("BASE_URL")),
        }
        return Response(LlmUsageOutputSerializer(data).data)


urlpatterns = [
    path("llm-usage/", LlmUsageView.as_view(), name="llm-usage"),
]
