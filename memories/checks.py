"""System checks: environment variables that no longer do anything say so."""

from __future__ import annotations

import os
from typing import Any

from django.core import checks

# the ranking policy moved from the environment into the per-project settings
MOVED_TO_PROJECT_SETTINGS = {
    "RETRIEVAL_RRF_K": "search.rrf_k",
    "RETRIEVAL_BM25_K1": "search.bm25_k1",
    "RETRIEVAL_BM25_B": "search.bm25_b",
    "RETRIEVAL_AUTO_KEYWORD_WEIGHT": "search.keyword_weight",
    "RETRIEVAL_NEIGHBOUR_WEIGHT": "search.neighbour_weight",
    "RETRIEVAL_RECENCY_WEIGHT": "search.recency_weight",
    "RETRIEVAL_RECENCY_HALF_LIFE_DAYS": "search.recency_half_life_days",
    "RETRIEVAL_IMPORTANCE_WEIGHT": "search.importance_weight",
}


@checks.register()
def moved_environment_variables(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """A warning for each ranking variable still set: it is ignored now."""
    return [
        checks.Warning(
            f"{variable} is no longer read: ranking is configured per project.",
            hint=f'Set "{setting}" with PATCH /api/v1/settings/ or in the admin (Projects).',
            id="memories.W001",
        )
        for variable, setting in MOVED_TO_PROJECT_SETTINGS.items()
        if variable in os.environ
    ]
