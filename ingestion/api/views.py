"""Documents: upload (multipart file or JSON text), list, get, delete, re-ingest, and
a document's chunks. Every object is fetched through the key's project (another
project's document is a 404); read-only keys may only read."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ingestion.api import serializers as s
from ingestion.api.uploads import UploadTooLarge, too_large_response, upload_size_guard
from ingestion.models import Document
from ingestion.services.chunks import chunks_of
from ingestion.services.documents import (
    DocumentConflict,
    DocumentRejected,
    DocumentTooLarge,
    DocumentUpload,
    document_create,
    document_delete,
    document_reingest,
)
from memories.api.pagination import (
    INTEGER,
    UUID,
    Key,
    Ordering,
    PageQuerySerializer,
    newest_first,
    page_get,
)
from memories.api.parsers import DepthLimitedJSONParser
from memories.api.scoping import actor_of, idempotent, parse_uuid, project_of
from memories.models import EndUser

TOO_LARGE = OpenApiResponse(description="Larger than INGESTION_MAX_UPLOAD_MB (body not read).")
NEWEST = newest_first(pk=UUID)
# a version's chunk indexes are unique; the pk keeps the order total all the same
IN_ORDER = Ordering(keys=(Key("chunk_index", INTEGER), Key("pk", UUID)))


def document_get(request: Request, document_id: str) -> Document:
    document = (
        Document.objects.for_project(project_of(request))
        .select_related("end_user", "project")
        .filter(pk=parse_uuid(document_id))
        .first()
    )
    if document is None:
        raise Http404("No such document.")
    return document


def _query(request: Request, serializer_class: type[serializers.Serializer]) -> dict[str, Any]:
    serializer = serializer_class(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _with_user(documents: QuerySet[Document]) -> QuerySet[Document]:
    return documents.select_related("end_user")


def _rejected(error: DocumentRejected) -> Exception:
    if isinstance(error, DocumentTooLarge):
        return UploadTooLarge()
    return serializers.ValidationError({error.field: [str(error)]})


def _upload_of(request: Request) -> DocumentUpload:
    """The upload the request carries, as a multipart file or a JSON text."""
    data: serializers.Serializer
    if request.content_type.startswith("multipart/"):
        data = s.DocumentFileInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = dict(data.validated_data)
        file = params.pop("file")
        content = file.read()
        source = params.pop("source", None) or file.name or "upload"
    else:
        data = s.DocumentTextInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = dict(data.validated_data)
        content = params.pop("text").encode()
        source = params.pop("source")
    return DocumentUpload(data=content, source=source, **params)


@extend_schema(tags=["documents"])
class DocumentListView(APIView):
    parser_classes = [DepthLimitedJSONParser, MultiPartParser]

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, UploadTooLarge):  # also raised while the body is parsed
            return too_large_response()
        return super().handle_exception(exc)

    @extend_schema(
        parameters=[s.DocumentListQuerySerializer, PageQuerySerializer],
        responses=s.DocumentPageOutputSerializer,
        operation_id="v1_documents_list",
    )
    def get(self, request: Request) -> Response:
        """The project's documents, newest first, with their status and progress."""
        params = _query(request, s.DocumentListQuerySerializer)
        project = project_of(request)
        documents = Document.objects.for_project(project)
        if "status" in params:
            documents = documents.filter(status=params["status"])
        if "user" in params:
            users = EndUser.objects.for_project(project).by_external_id(params["user"])
            documents = documents.filter(end_user__in=users)
        if "scope" in params:
            documents = documents.filter(end_user__isnull=params["scope"] == "project")
        page = page_get(documents, request=request, ordering=NEWEST, load=_with_user)
        return Response(page.data(s.DocumentOutputSerializer))

    @extend_schema(
        request={
            "multipart/form-data": s.DocumentFileInputSerializer,
            "application/json": s.DocumentTextInputSerializer,
        },
        responses={
            202: s.DocumentUploadOutputSerializer,
            200: s.DocumentUploadOutputSerializer,
            413: TOO_LARGE,
        },
        operation_id="v1_documents_create",
    )
    def post(self, request: Request) -> Response:
        """Upload a document: 202 and its ingestion queued (parse, chunk, embed in a
        worker; follow `status` and `progress`), or 200 with `duplicate` when the same
        bytes are already there. The type comes from the content."""
        upload_size_guard(request)  # before anything reads the body
        upload = _upload_of(request)
        try:
            result = document_create(project=project_of(request), upload=upload)
        except DocumentRejected as error:
            raise _rejected(error) from None
        return Response(
            s.document_upload_data(result.document, result.duplicate),
            status=status.HTTP_200_OK if result.duplicate else status.HTTP_202_ACCEPTED,
        )


@extend_schema(tags=["documents"])
class DocumentDetailView(APIView):
    @extend_schema(responses=s.DocumentOutputSerializer, operation_id="v1_documents_retrieve")
    def get(self, request: Request, document_id: str) -> Response:
        """A document: status, progress, error, timings."""
        return Response(s.DocumentOutputSerializer(document_get(request, document_id)).data)

    @extend_schema(responses={204: None}, operation_id="v1_documents_destroy")
    def delete(self, request: Request, document_id: str) -> Response:
        """Delete the document, its chunks and their vectors (each chunk's deletion is
        recorded in its revisions)."""
        document_delete(document=document_get(request, document_id), actor=actor_of(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["documents"])
class DocumentReingestView(APIView):
    @extend_schema(
        request=s.DocumentReingestInputSerializer,
        responses={202: s.DocumentOutputSerializer},
        operation_id="v1_documents_reingest",
    )
    @idempotent
    def post(self, request: Request, document_id: str) -> Response:
        """Ingest the stored bytes again (optionally with another chunker or settings) as
        a new version; the current chunks are served until it is done."""
        document = document_get(request, document_id)
        data = s.DocumentReingestInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            document = document_reingest(document=document, **data.validated_data)
        except DocumentRejected as error:
            raise _rejected(error) from None
        except DocumentConflict as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        return Response(s.DocumentOutputSerializer(document).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(tags=["documents"])
class DocumentChunkListView(APIView):
    @extend_schema(
        parameters=[s.ChunkListQuerySerializer, PageQuerySerializer],
        responses=s.ChunkPageOutputSerializer,
        operation_id="v1_documents_chunks_list",
    )
    def get(self, request: Request, document_id: str) -> Response:
        """The document's chunks in order, each with its citation (page, heading)."""
        document = document_get(request, document_id)
        params = _query(request, s.ChunkListQuerySerializer)
        chunks = chunks_of(document).filter(status=params["status"])
        page = page_get(chunks, request=request, ordering=IN_ORDER)
        return Response(page.data(s.ChunkOutputSerializer))
