"""Search: vector, keyword, hybrid and auto ranking of a project's memories."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api import serializers as s
from memories.api.scoping import project_of
from memories.models import EndUser, Room
from memories.services.search import SearchFilters, memory_search

# DRF builds a ModelSerializer's fields anew for every instance (about 1 ms here);
# to_representation only reads them, so one instance serves every request and thread
MEMORY_OUTPUT = s.MemoryOutputSerializer()


@extend_schema(tags=["search"])
class SearchView(APIView):
    read_only_post = True  # a search changes nothing: read-only keys may use it

    @extend_schema(request=s.SearchInputSerializer, responses=s.SearchOutputSerializer)
    def post(self, request: Request) -> Response:
        """Vector, keyword or hybrid (RRF) search with filters; `explain` shows each signal."""
        data = s.SearchInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        project = project_of(request)
        filters = SearchFilters(
            kinds=params.get("kind", []),
            metadata=params.get("metadata"),
            start=params.get("start"),
            end=params.get("end"),
        )
        for name, model, attribute in (("user", EndUser, "end_user_id"), ("room", Room, "room_id")):
            if name in params:
                row_id = (
                    model.objects.filter(project=project, external_id=params[name])
                    .values_list("pk", flat=True)
                    .first()
                )
                if row_id is None:  # nobody by that id: nothing to find
                    return Response({"mode": params["mode"], "results": [], "timings_ms": {}})
                setattr(filters, attribute, row_id)
        result = memory_search(
            project=project,
            query=(params.get("query") or "").strip() or None,
            embedding=params.get("embedding"),
            mode=params["mode"],
            filters=filters,
            k=params["k"],
            threshold=params.get("threshold"),
            explain=params["explain"],
        )
        memories = [MEMORY_OUTPUT.to_representation(hit.memory) for hit in result.hits]
        results = []
        for hit, memory in zip(result.hits, memories, strict=True):
            item: dict[str, Any] = {
                "memory": memory,
                "score": hit.score,
                "similarity": hit.similarity,
            }
            if params["explain"]:
                item["explain"] = hit.explain
            results.append(item)
        return Response({"mode": result.mode, "results": results, "timings_ms": result.timings_ms})
