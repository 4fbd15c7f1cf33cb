"""The console's Documents tab: the project's documents with their progress (read
again every 2 s while one is in flight), upload, re-ingest, delete with confirmation,
and a document's chunks with their citations.

Every view is a project's console view (console.views.access.project_view: another
project's document is a 404, a viewer's change a 403); changes go through the
services the API uses (ingestion.services.documents), recorded as the operator.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.services.user_page import Page, page_number
from console.views.access import ConsoleRequest, project_view
from ingestion.api.uploads import CappedUploadHandler, UploadTooLarge
from ingestion.chunkers import CHUNKERS
from ingestion.models import Document
from ingestion.services.chunks import chunks_of
from ingestion.services.documents import (
    DocumentConflict,
    DocumentRejected,
    DocumentUpload,
    document_create,
    document_delete,
    document_reingest,
    max_upload_bytes,
)
from memories.api.validators import id_problem
from memories.models import Memory, Project
from memories.services.revisions import Actor

LIST = "console/documents.html"
DETAIL = "console/document.html"
DELETE = "console/document_delete.html"
DOCUMENTS_PAGE = 25
CHUNKS_PAGE = 20
CHANGED = "documents-changed"  # an HX-Trigger event: the list reads itself again


def _actor(request: ConsoleRequest) -> Actor:
    return Actor.operator(request.user.get_username())


def upload_limit_bytes() -> int:
    """The largest upload the console takes: the documents' cap, or the request body
    limit of non-API paths if that is lower (RequestLimitsMiddleware refuses first)."""
    return min(max_upload_bytes(), int(settings.MEMORYHUB["MAX_BODY_BYTES"]))


class DocumentUploadForm(forms.Form):
    file = forms.FileField(help_text="PDF, DOCX, Markdown, HTML, JSON or plain text.")
    title = forms.CharField(required=False, max_length=500, help_text="Default: its own title.")
    user = forms.CharField(
        required=False,
        max_length=255,
        help_text="A user's external id: only her searches find it. Empty: the whole project.",
    )
    chunker = forms.ChoiceField(
        required=False,
        choices=[("", "the project's default"), *((name, name) for name in CHUNKERS)],
    )

    def clean_user(self) -> str | None:
        value = self.cleaned_data["user"].strip()
        problem = id_problem(value) or ("May not contain '/'." if "/" in value else None)
        if problem:
            raise forms.ValidationError(problem)
        return value or None


def _document_of(request: ConsoleRequest, document_id: uuid.UUID) -> Document:
    """The project's document; 404 for another project's or none."""
    project = request.project
    documents = Document.objects.for_project(project).select_related("end_user", "project")
    return get_object_or_404(documents, pk=document_id)


def _documents_page(project: Project, raw_page: str | None) -> tuple[Page, bool]:
    """A page of the project's documents, newest first, and whether any document of the
    project is still in flight (the list then reads itself again)."""
    documents = Document.objects.for_project(project)
    count = documents.count()
    number = page_number(raw_page, pages=max(1, -(-count // DOCUMENTS_PAGE)))
    offset = (number - 1) * DOCUMENTS_PAGE
    rows = list(
        documents.select_related("end_user")
        .defer("chunker_settings", "metadata", "timings")
        .order_by("-created_at", "-pk")[offset : offset + DOCUMENTS_PAGE]
    )
    in_flight = documents.unfinished().exists()
    return Page(items=rows, number=number, count=count, size=DOCUMENTS_PAGE), in_flight


def _list_context(request: ConsoleRequest, **extra: Any) -> dict[str, Any]:
    project = request.project
    page, in_flight = _documents_page(project, request.GET.get("page"))
    return {
        "project": project,
        "can_edit": request.can_edit,
        "section": "documents",
        "documents": page,
        "in_flight": in_flight,
        "upload_limit": upload_limit_bytes(),
        **extra,
    }


@project_view()
@require_GET
def documents(request: ConsoleRequest) -> HttpResponse:
    """The Documents tab; asked by HTMX (the poll, a page link), the list alone."""
    context = _list_context(request, form=DocumentUploadForm())
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, f"{LIST}#documents-list", context)
    return render(request, LIST, context)


@csrf_exempt  # checked below, once the upload handlers are in place (Django's pattern)
@require_POST
def document_upload(request: HttpRequest, project_id: int) -> HttpResponse:
    """Upload a document through document_create (the API's service): the file is
    refused (413) as soon as it passes the cap, before it is all read."""
    limit = max_upload_bytes()
    request.upload_handlers.insert(0, CappedUploadHandler(request, limit))
    try:
        return _document_upload(request, project_id)
    except UploadTooLarge:
        megabytes = upload_limit_bytes() / (1024 * 1024)
        return HttpResponse(
            f"Uploads are limited to {megabytes:.3g} MB.", status=413, content_type="text/plain"
        )


@project_view(edit=True)
@csrf_protect
def _document_upload(request: ConsoleRequest) -> HttpResponse:
    """The upload, past the access and CSRF checks: the upload card again (a fresh form
    and what happened, or the form with its errors in place: 422)."""
    project = request.project
    form = DocumentUploadForm(request.POST, request.FILES)
    notice, status = "", 422
    if form.is_valid():
        file = form.cleaned_data["file"]
        upload = DocumentUpload(
            data=file.read(),
            source=file.name or "upload",
            title=form.cleaned_data["title"],
            user=form.cleaned_data["user"],
            chunker=form.cleaned_data["chunker"] or None,
        )
        try:
            created = document_create(project=project, upload=upload)
        except DocumentRejected as error:
            form.add_error(error.field if error.field in form.fields else None, str(error))
        else:
            name = created.document.title or created.document.source
            notice = (
                f"“{name}” is already there (the same bytes): nothing queued."
                if created.duplicate
                else f"“{name}” is queued: a worker parses, chunks and embeds it."
            )
            form, status = DocumentUploadForm(), 200
    context = _list_context(request, form=form, notice=notice)
    response = render(request, f"{LIST}#upload", context, status=status)
    if status == 200:
        response["HX-Trigger"] = CHANGED
    return response


@project_view()
@require_GET
def document_detail(request: ConsoleRequest, document_id: uuid.UUID) -> HttpResponse:
    """A document: what it is, where it stands, and its chunks in order with their
    citations, a page at a time (the served version's; ``status=staged``: the
    version being ingested)."""
    document = _document_of(request, document_id)
    status = request.GET.get("status")
    status = Memory.Status.STAGED if status == Memory.Status.STAGED else Memory.Status.ACTIVE
    chunks = chunks_of(document).filter(status=status)
    count = chunks.count()
    number = page_number(request.GET.get("page"), pages=max(1, -(-count // CHUNKS_PAGE)))
    offset = (number - 1) * CHUNKS_PAGE
    shown = chunks.only(
        "id", "public_id", "chunk_index", "content", "content_json", "embedding_status"
    )
    rows = list(shown.order_by("chunk_index")[offset : offset + CHUNKS_PAGE])
    context = {
        "project": request.project,
        "can_edit": request.can_edit,
        "section": "documents",
        "document": document,
        "chunk_status": status,
        "staged": chunks_of(document).filter(status=Memory.Status.STAGED).count(),
        "chunks": Page(items=rows, number=number, count=count, size=CHUNKS_PAGE),
        "in_flight": document.status in Document.UNFINISHED,
    }
    if request.htmx and not request.htmx.history_restore_request:
        part = "document-live" if request.htmx.target == "document-live" else "chunks"
        return render(request, f"{DETAIL}#{part}", context)
    return render(request, DETAIL, context)


@project_view(edit=True)
@require_POST
def document_reingest_view(request: ConsoleRequest, document_id: uuid.UUID) -> HttpResponse:
    """Ingest the stored bytes again as a new version (the current chunks are served
    until it is done); answers HTMX with the list, saying so, and a plain form (the
    document's page) with the document's page again."""
    document = _document_of(request, document_id)
    name = document.title or document.source
    try:
        document_reingest(document=document)
    except (DocumentRejected, DocumentConflict) as error:
        context = _list_context(request, list_error=f"“{name}” was not re-ingested: {error}")
    else:
        if not request.htmx:  # the document page's form
            return redirect("console-document", document.project_id, document.pk)
        context = _list_context(request, list_notice=f"“{name}” is queued again as a new version.")
    if request.htmx:
        return render(request, f"{LIST}#documents-list", context)
    return render(request, LIST, {**context, "form": DocumentUploadForm()})


@project_view(edit=True)
@require_http_methods(["GET", "POST"])
def document_delete_view(request: ConsoleRequest, document_id: uuid.UUID) -> HttpResponse:
    """GET, or a POST without ``confirm=yes``: what deleting the document removes. POST
    with it: delete it, its chunks and their vectors through document_delete (each
    chunk's deletion recorded), then what was deleted."""
    document = _document_of(request, document_id)
    context: dict[str, Any] = {
        "project": request.project,
        "can_edit": True,
        "section": "documents",
        "document": document,
        "chunks": chunks_of(document).count(),
    }
    if request.method == "POST" and request.POST.get("confirm") == "yes":
        context.update(deleted=document_delete(document=document, actor=_actor(request)), done=True)
    return render(request, DELETE, context)
