"""The curators' memory list: filters and search that stay fast on 100,000s of rows,
a memory's history on its page, and bulk actions through the same services as the API
(each change recorded as a revision with the operator's name)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, cast

from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.postgres.search import SearchQuery, SearchVectorField
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL
from django.http import HttpRequest, StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from memories.admin.base import (
    InputFilter,
    LargeTableAdmin,
    actor_of,
    as_uuid,
    changes_html,
    deletion_summary,
)
from memories.api.serializers import MemoryOutputSerializer
from memories.models import (
    SEARCH_CONFIG,
    Embedding,
    EndUser,
    Memory,
    MemoryQuerySet,
    MemoryRevision,
    Room,
    keyword_document_sql,
)
from memories.services.erasure import memories_erase
from memories.services.memories import (
    UPDATABLE_FIELDS,
    memories_status_change,
    memory_delete,
    memory_update,
)
from memories.services.reembed import locked_reembed

BATCH = 500  # memories an action locks and commits at a time
HISTORY_SHOWN = 50  # revisions on a memory's page (all of them: the revision list)
EXPORT_CHUNK = 1000  # rows read at a time by an export


class UserFilter(InputFilter):
    title = "user (external id)"
    parameter_name = "user"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> QuerySet[Memory]:
        value = self.value()
        return queryset.filter(end_user__external_id=value) if value else queryset


class RoomFilter(InputFilter):
    title = "room (external id)"
    parameter_name = "room"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> QuerySet[Memory]:
        value = self.value()
        return queryset.filter(room__external_id=value) if value else queryset


class EmbeddingInline(admin.TabularInline):
    """The memory's vectors (one per window of its text), without the numbers."""

    model = Embedding
    readonly_fields = ("space", "window", "created_at")
    fields = readonly_fields
    ordering = ["space", "window"]
    extra = 0
    can_delete = False
    verbose_name_plural = "embeddings (one per window of the text)"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def in_locked_batches(queryset: QuerySet[Memory], apply: Callable[[list[Memory]], int]) -> int:
    """Call ``apply`` on the selected memories BATCH at a time, each batch locked (in id
    order: two overlapping actions wait for each other instead of deadlocking) and
    committed on its own: a whole-table selection neither holds every lock at once nor
    starts over after a failure. Returns the sum of what ``apply`` returned."""
    ids = list(queryset.order_by().values_list("pk", flat=True))
    done = 0
    for start in range(0, len(ids), BATCH):
        with transaction.atomic():
            batch = Memory.objects.select_for_update().filter(pk__in=ids[start : start + BATCH])
            done += apply(list(batch.order_by("pk")))
    return done


# the memory's fields shown, never edited, in the form's sections of these names
WHO_AND_WHERE = ("project", "end_user", "room", "agent", "document_id", "chunk_index")
EMBEDDING_AND_USE = (
    "embedding_status",
    "embedded_at",
    "importance_score",
    "access_count",
    "accessed_at",
    "content_hash",
    "is_unique",
)
IDENTITY_AND_TIMES = ("public_id", "id", "created_at", "updated_at")


@admin.register(Memory)
class MemoryAdmin(LargeTableAdmin):
    list_display = [
        "short_content",
        "kind_role",
        "end_user",
        "room",
        "project",
        "status",
        "embedding_status",
        "pinned",
        "importance_score",
        "created_at",
    ]
    list_filter = [
        "project",
        UserFilter,
        RoomFilter,
        "kind",
        "status",
        "embedding_status",
        "role",
        "pinned",
        "created_at",
    ]
    list_select_related = ["end_user", "room", "project"]
    # the search is get_search_results' (full text, ids); a non-empty list shows the box
    search_fields = ["content"]
    search_help_text = (
        "Words of the text (full-text search, as the API's keyword search: "
        "\"a phrase\", -word, or), a user's or room's exact external id, or a memory "
        "or document id."
    )
    ordering = ["-created_at"]
    fieldsets = [
        (
            None,
            {"fields": ["content", "kind", "role", "status", "pinned", "importance", "confidence"]},
        ),
        ("Structured", {"fields": ["content_json", "metadata", "source_ids"]}),
        (
            "Who and where",
            {"fields": WHO_AND_WHERE},
        ),
        (
            "Embedding and use",
            {"fields": EMBEDDING_AND_USE},
        ),
        ("Identity and times", {"fields": IDENTITY_AND_TIMES}),
        ("History", {"fields": ["history"]}),
    ]
    # what memory_update may change is editable; the rest is shown
    readonly_fields = ["kind", *WHO_AND_WHERE, *EMBEDDING_AND_USE, *IDENTITY_AND_TIMES, "history"]
    inlines = [EmbeddingInline]
    actions = ["re_embed", "archive", "pin", "unpin", "export_json"]

    class Media:
        css = {"all": ["memories/admin.css"]}

    @admin.display(description="content")
    def short_content(self, memory: Memory) -> str:
        text = memory.content
        return text if len(text) <= 80 else f"{text[:79]}…"

    @admin.display(description="kind", ordering="kind")
    def kind_role(self, memory: Memory) -> str:
        return f"{memory.kind} ({memory.role})" if memory.role else memory.kind

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Memory], search_term: str
    ) -> tuple[QuerySet[Memory], bool]:
        """Full text through the GIN-indexed search vector, or an exact external id, or
        an id: each an index lookup (a substring search would read every row)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        if (found := as_uuid(term)) is not None:
            # the id clients know (in any project), the hub's own, or a document's
            matches = Q(public_id=found) | Q(pk=found) | Q(document_id=found)
            return queryset.filter(matches), False
        # the ids first: memory columns ORed together use each one's index (BitmapOr)
        users = list(EndUser.objects.filter(external_id=term).values_list("pk", flat=True))
        rooms = list(Room.objects.filter(external_id=term).values_list("pk", flat=True))
        words = SearchQuery(term, config=SEARCH_CONFIG, search_type="websearch")
        # the keyword index's own expression, so the index serves the match
        document = RawSQL(keyword_document_sql('"memories_memory"'), [], SearchVectorField())
        queryset = queryset.annotate(keyword_document=document)
        matches = Q(keyword_document=words)
        if users:
            matches |= Q(end_user__in=users)
        if rooms:
            matches |= Q(room__in=rooms)
        return queryset.filter(matches), False

    @admin.display(description="revisions, newest first")
    def history(self, memory: Memory) -> str:
        revisions = list(
            MemoryRevision.objects.filter(
                project_id=memory.project_id, memory_public_id=memory.public_id
            ).order_by("-created_at", "-pk")[: HISTORY_SHOWN + 1]
        )
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td></tr>",
            (
                (
                    f"{timezone.localtime(r.created_at):%Y-%m-%d %H:%M:%S}",
                    r.action,
                    r.actor,
                    r.actor_type,
                    changes_html(r.before, r.after),
                )
                for r in revisions[:HISTORY_SHOWN]
            ),
        )
        every = reverse("admin:memories_memoryrevision_changelist") + f"?q={memory.public_id}"
        more = "every revision" if len(revisions) > HISTORY_SHOWN else "in the revision list"
        return format_html(
            "<table><thead><tr><th>when</th><th>action</th><th>who</th>"
            "<th>what changed (before → after)</th></tr></thead><tbody>{}</tbody></table>"
            '<p><a href="{}">{}</a></p>',
            rows,
            every,
            more,
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # memories are written through the API (embedding, dedup, signals)

    def save_model(self, request: HttpRequest, obj: Memory, form: Any, change: bool) -> None:
        """Through memory_update: recorded as a revision, new text re-embedded."""
        changes = {name: form.cleaned_data[name] for name in form.changed_data}
        memory_update(
            memory=obj,
            changes={name: value for name, value in changes.items() if name in UPDATABLE_FIELDS},
            actor=actor_of(request),
        )

    def delete_model(self, request: HttpRequest, obj: Memory) -> None:
        memory_delete(memory=obj, actor=actor_of(request))

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        """Each memory is recorded as deleted (memory_delete); its vectors go with it."""
        vectors = Embedding.objects.filter(memory__in=objs).count()
        return deletion_summary(objs, self.model._meta, also={"embedding windows": vectors})

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        """As memories_delete does: erased (memories.services.erasure), a locked batch
        at a time (a selection of the whole list stays a few queries per BATCH
        memories)."""
        actor = actor_of(request)

        def delete(memories: list[Memory]) -> int:
            erased = 0
            for project_id in sorted({memory.project_id for memory in memories}):
                ids = [memory.pk for memory in memories if memory.project_id == project_id]
                receipt = memories_erase(
                    project_id=project_id, ids=ids, actor=actor, reason="admin delete"
                )
                erased += receipt.counts["memories"]
            return erased

        in_locked_batches(queryset, delete)

    @admin.action(description="Re-embed selected memories (vectors computed again)")
    def re_embed(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        user_id = cast(int, request.user.pk)  # the admin serves logged-in staff only

        def reembed(memories: list[Memory]) -> int:
            locked_reembed(ids=[memory.pk for memory in memories])
            # no revision (the memory is unchanged); the admin's log says who asked
            LogEntry.objects.log_actions(
                user_id=user_id,
                queryset=memories,
                action_flag=CHANGE,
                change_message="Re-embedded",
            )
            return len(memories)

        count = in_locked_batches(queryset, reembed)
        self.message_user(request, f"{count} memories queued for embedding.")

    @admin.action(description="Archive selected memories (active ones; kept, out of the buffer)")
    def archive(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        actor = actor_of(request)

        def archive(memories: list[Memory]) -> int:
            active = [m for m in memories if m.status == Memory.Status.ACTIVE]
            if active:
                memories_status_change(
                    memories=active, status=Memory.Status.ARCHIVED, action="archive", actor=actor
                )
            return len(active)

        count = in_locked_batches(queryset, archive)
        self.message_user(request, f"{count} memories archived (only active ones are).")

    def _pinned_set(self, request: HttpRequest, queryset: QuerySet[Memory], pinned: bool) -> int:
        actor = actor_of(request)

        def pin(memories: list[Memory]) -> int:
            changed = [m for m in memories if m.pinned != pinned]
            for memory in changed:
                memory_update(memory=memory, changes={"pinned": pinned}, actor=actor)
            return len(changed)

        return in_locked_batches(queryset, pin)

    @admin.action(description="Pin selected memories (never pruned, importance 1)")
    def pin(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        self.message_user(request, f"{self._pinned_set(request, queryset, True)} pinned.")

    @admin.action(description="Unpin selected memories")
    def unpin(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        self.message_user(request, f"{self._pinned_set(request, queryset, False)} unpinned.")

    @admin.action(description="Export selected memories as JSON")
    def export_json(self, request: HttpRequest, queryset: MemoryQuerySet) -> StreamingHttpResponse:
        """A download of the memories as the API shows them ({"results": [...]}, oldest
        first), streamed: a selection of the whole table is never held in memory."""
        memories = queryset.with_external_ids().order_by("created_at", "pk")
        response = StreamingHttpResponse(export_chunks(memories), content_type="application/json")
        stamp = f"{timezone.now():%Y%m%d-%H%M%S}"
        response["Content-Disposition"] = f'attachment; filename="memories-{stamp}.json"'
        return response


def export_chunks(memories: QuerySet[Memory]) -> Iterator[str]:
    """The export document, piece by piece."""
    yield '{"results": ['
    for n, memory in enumerate(memories.iterator(chunk_size=EXPORT_CHUNK)):
        data = MemoryOutputSerializer(memory).data
        yield ("," if n else "") + json.dumps(data, cls=DjangoJSONEncoder, ensure_ascii=False)
    yield "]}"
