"""Pruning: a dry run of the project's policies (or one user's), a real run queued for a
worker, and the record of the last runs."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api.fields import external_id_field
from memories.api.pagination import (
    INTEGER,
    PageQuerySerializer,
    newest_first,
    page_get,
    page_serializer,
)
from memories.api.schema import ERROR_REF
from memories.api.scoping import actor_of, api_key_of, end_user_get, idempotent, project_of
from memories.models import MaintenanceRun
from memories.services.pruning import (
    POLICIES,
    PRUNE_TASK,
    PruneQueueUnavailable,
    prune_enqueue,
    prune_run,
)

NEWEST = newest_first(pk=INTEGER, moment="started_at")


class PruneInputSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField(
        default=True,
        help_text="true (the default): report what would be pruned and purged, change "
        "nothing (a read-only key may); false: queue a real run (needs a write key).",
    )
    user = external_id_field(
        required=False,
        help_text="Only this user's memories (external id); the whole project without it.",
    )


class PruneRunOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    task = serializers.CharField()
    dry_run = serializers.BooleanField()
    status = serializers.CharField(
        help_text="running (a queued run until its worker ends it), ok or failed."
    )
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    user = serializers.SerializerMethodField(help_text="The user the run was limited to.")
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text=f"Memories per policy ({', '.join(POLICIES)}), `total`; a real run adds "
        "`skipped` (changed since the plan: pinned, no longer active) and `purged`; a dry "
        "run's `purged` is how many a real run would purge.",
    )
    error = serializers.CharField(help_text="Why a failed run failed.")

    def get_user(self, run: MaintenanceRun) -> str | None:
        return run.details.get("user")


class PruneRunDetailOutputSerializer(PruneRunOutputSerializer):
    ids = serializers.SerializerMethodField(
        help_text="The memories' ids per policy, in the order (user, created_at, id)."
    )
    truncated = serializers.SerializerMethodField(
        help_text="true when more ids were chosen than a run lists (10,000; counts are exact)."
    )

    def get_ids(self, run: MaintenanceRun) -> dict[str, list[str]]:
        ids: dict[str, list[str]] = run.details.get("ids", {})
        return {policy: ids.get(policy, []) for policy in POLICIES}

    def get_truncated(self, run: MaintenanceRun) -> bool:
        return bool(run.details.get("truncated", False))


PruneRunPageOutputSerializer = page_serializer(PruneRunOutputSerializer, order="Newest first.")


class PruneQueueUnavailableError(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The task queue is unavailable (Redis unreachable); retry later."
    default_code = "queue_unavailable"
    wait = 5  # DRF's handler sends it as Retry-After (a process retries Redis after 5 s)


@extend_schema(tags=["pruning"])
class PruneView(APIView):
    read_only_post = True  # a dry run changes nothing; a real run checks the key itself

    @extend_schema(
        request=PruneInputSerializer,
        responses={
            200: OpenApiResponse(PruneRunDetailOutputSerializer, description="A dry run."),
            202: OpenApiResponse(
                PruneRunDetailOutputSerializer,
                description="A real run, queued: follow it at /api/v1/prune/runs/{id}/.",
            ),
            403: OpenApiResponse(ERROR_REF, description="A real run with a read-only key."),
            404: OpenApiResponse(ERROR_REF, description="No such user in the project."),
        },
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Apply the project's pruning policies (`pruning` settings), or one user's:
        a dry run answers at once with what each policy would prune (and how many pruned
        memories the purge would delete); `dry_run: false` queues the real run (prune,
        then purge) for a worker and answers 202 with its id. Either is recorded."""
        data = PruneInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        if not params["dry_run"] and not api_key_of(request).can_write:
            raise exceptions.PermissionDenied("This API key is read-only: it may only dry-run.")
        end_user = end_user_get(request, params["user"]) if "user" in params else None
        project, actor = project_of(request), actor_of(request)
        if params["dry_run"]:
            run = prune_run(
                project=project, actor=actor, dry_run=True, end_user=end_user, purge=True
            )
            return Response(PruneRunDetailOutputSerializer(run).data)
        try:
            run = prune_enqueue(project=project, actor=actor, end_user=end_user)
        except PruneQueueUnavailable:
            raise PruneQueueUnavailableError() from None
        return Response(
            PruneRunDetailOutputSerializer(run).data,
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": f"/api/v1/prune/runs/{run.pk}/"},
        )


def _runs(request: Request) -> Any:
    return MaintenanceRun.objects.filter(project=project_of(request), task=PRUNE_TASK)


@extend_schema(tags=["pruning"])
class PruneRunListView(APIView):
    @extend_schema(
        parameters=[PageQuerySerializer],
        responses=PruneRunPageOutputSerializer,
        operation_id="v1_prune_runs_list",
    )
    def get(self, request: Request) -> Response:
        """The project's pruning runs (dry and real), newest first, without their ids
        (GET one run for those)."""
        page = page_get(_runs(request), request=request, ordering=NEWEST)
        return Response(page.data(PruneRunOutputSerializer))


@extend_schema(tags=["pruning"])
class PruneRunDetailView(APIView):
    @extend_schema(responses=PruneRunDetailOutputSerializer)
    def get(self, request: Request, run_id: int) -> Response:
        """One pruning run of the project, with the ids per policy."""
        run = _runs(request).filter(pk=run_id).first()
        if run is None:
            raise Http404("No such run.")
        return Response(PruneRunDetailOutputSerializer(run).data)
