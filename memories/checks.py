"""System checks: environment variables that no longer do anything say so."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from django.conf import settings
from django.core import checks

from memories.providers.embedding_runtimes import RUNTIMES

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


@checks.register()
def embedding_runtime(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """An error for an EMBEDDING_RUNTIME the local provider does not know or cannot load
    (without loading the model: the ONNX graphs themselves are exported at first use)."""
    config = settings.EMBEDDING
    runtime = config.get("RUNTIME", "torch")
    if config["PROVIDER"] != "local":
        return []
    if runtime not in RUNTIMES:
        return [
            checks.Error(
                f"EMBEDDING_RUNTIME={runtime!r} is not a runtime of the local model.",
                hint=f"Set one of {', '.join(RUNTIMES)}.",
                id="memories.E001",
            )
        ]
    module = "torch" if runtime == "torch" else "onnxruntime"
    if importlib.util.find_spec(module) is None:
        return [
            checks.Error(
                f"EMBEDDING_RUNTIME={runtime} needs the {module} package, not installed.",
                hint="Install the project's dependencies again (make run does it).",
                id="memories.E002",
            )
        ]
    return []
