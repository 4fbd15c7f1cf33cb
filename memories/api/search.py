"""Search: vector, keyword, hybrid and auto ranking of a project's memories."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api import search_serializers as s
from memories.api.scoping import project_of
from memories.api.serializers import MEMORY_OUTPUT
from memories.models import EndUser, Memory, Project, Room
from memories.services.access import accesses_record
from memories.services.search import SearchFilters, SearchResult, memory_search
from memories.services.users import external_row_id


@extend_schema(tags=["search"])
class SearchView(APIView):
    read_only_post = True  # a search changes nothing: read-only keys may use it

    @extend_schema(request=s.SearchInputSerializer, responses=s.SearchOutputSerializer)
    def post(self, request: Request) -> Response:
        """Auto, vector, keyword or hybrid (RRF) search with filters; `explain` shows each
        signal. Without `mode`, the project's `search.default_mode`."""
        project = project_of(request)
        data = s.SearchInputSerializer(data=request.data, context={"project": project})
        data.is_valid(raise_exception=True)
        params = data.validated_data
        filters = _filters(project, params)
        if filters is None:  # a user or room the project does not have: nothing to find
            result = SearchResult(hits=[], mode=params["mode"], timings_ms={})
        else:
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
            accesses_record(project=project, memory_ids=[hit.memory.pk for hit in result.hits])
        # what SearchOutputSerializer renders (it documents the response; a test holds the
        # two equal): building its nested fields anew for each request cost more than
        # rendering the hits
        return Response(search_payload(result, params["explain"]))


def search_payload(result: SearchResult, explain: bool) -> dict[str, Any]:
    """The response of a search: SearchOutputSerializer's rendering of ``result``."""
    hits = []
    for hit in result.hits:
        rendered = {
            "memory": MEMORY_OUTPUT.to_representation(hit.memory),
            "score": float(hit.score),
            "similarity": None if hit.similarity is None else float(hit.similarity),
        }
        if explain:
            rendered["explain"] = {str(name): part for name, part in hit.explain.items()}
        hits.append(rendered)
    timings = {str(name): float(ms) for name, ms in result.timings_ms.items()}
    return {"mode": result.mode, "results": hits, "timings_ms": timings}


def _filters(project: Project, params: dict[str, Any]) -> SearchFilters | None:
    """The request's filters, users and rooms as row ids; None when it names a user or
    room the project does not have (an unknown agent or world matches nothing in the
    statement itself: filters.py)."""
    filters = SearchFilters(
        agent=params.get("agent"),
        world=params.get("world"),
        kinds=params.get("kind", []),
        statuses=params.get("status") or [Memory.Status.ACTIVE],
        metadata=params.get("metadata"),
        start=params.get("start"),
        end=params.get("end"),
        document_id=params.get("document"),
    )
    if "user" in params:
        filters.end_user_id = external_row_id(EndUser, project, params["user"])
        if filters.end_user_id is None:
            return None
    if "room" in params:
        filters.room_id = external_row_id(Room, project, params["room"])
        if filters.room_id is None:
            return None
    return filters
