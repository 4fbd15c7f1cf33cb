"""Documents in the admin: read-only, with re-ingest and delete through the services."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import filesizeformat

from ingestion.models import Document
from ingestion.services.documents import DocumentConflict, document_delete, document_reingest
from memories.services.revisions import Actor


def _actor(request: HttpRequest) -> Actor:
    return Actor.operator(request.user.get_username())  # type: ignore[union-attr]


class ScopeFilter(admin.SimpleListFilter):
    title = "scope"
    parameter_name = "scope"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("project", "Whole project"), ("user", "One user")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> QuerySet[Document]:
        if self.value() in ("project", "user"):
            return queryset.filter(end_user__isnull=self.value() == "project")
        return queryset


# every field shown, none editable; the bytes (DocumentContent) are never loaded here
FIELDS = (
    "id",
    "project",
    "end_user",
    "title",
    "source",
    "mime_type",
    "size",
    "sha256",
    "status",
    "error",
    "chunks_total",
    "chunks_done",
    "timings",
    "chunker",
    "chunker_settings",
    "version",
    "served_version",
    "attempts",
    "metadata",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
)


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = [
        "__str__",
        "source",
        "project",
        "scope_label",
        "status",
        "progress_label",
        "chunks_total",
        "size_label",
        "created_at",
    ]
    list_filter = ["status", ScopeFilter, "mime_type", "chunker", "project"]
    search_fields = ["title", "source", "sha256", "=id"]
    list_select_related = ["project", "end_user"]
    date_hierarchy = "created_at"
    actions = ["reingest", "delete_documents"]
    fields = FIELDS
    readonly_fields = FIELDS

    @admin.display(description="scope")
    def scope_label(self, document: Document) -> str:
        return document.end_user.external_id if document.end_user else "project"

    @admin.display(description="progress")
    def progress_label(self, document: Document) -> str:
        progress = document.progress
        return f"{progress['done']}/{progress['total']} ({progress['percent']:g}%)"

    @admin.display(description="size", ordering="size")
    def size_label(self, document: Document) -> str:
        return filesizeformat(document.size)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # uploads go through the API or `manage.py ingest`

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # it would leave the chunks behind
        return actions

    @admin.action(description="Re-ingest selected documents (stored bytes, same chunker)")
    def reingest(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        queued = 0
        for document in queryset.select_related("project"):
            try:
                document_reingest(document=document)
            except DocumentConflict as error:
                self.message_user(request, f"{document}: {error}", messages.WARNING)
                continue
            queued += 1
        self.message_user(request, f"Queued {queued} documents for re-ingestion.")

    @admin.action(
        description="Delete selected documents with their chunks and vectors",
        permissions=["delete"],
    )
    def delete_documents(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        documents = list(queryset)
        chunks = sum(
            document_delete(document=document, actor=_actor(request)) for document in documents
        )
        self.message_user(request, f"Deleted {len(documents)} documents and {chunks} chunks.")

    def delete_model(self, request: HttpRequest, obj: Document) -> None:
        document_delete(document=obj, actor=_actor(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        for document in queryset:
            document_delete(document=document, actor=_actor(request))
