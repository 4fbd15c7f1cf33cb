"""/documents/: upload (bytes, a file, a path or text), list, get, chunks, reingest,
delete. Waiting for ingestion is a loop of ``get`` (the clients' ``wait_until_done``)."""

from __future__ import annotations

import json
import mimetypes
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from memoryhub_client.endpoints.base import (
    Call,
    as_model,
    as_nothing,
    as_page,
    body,
    query,
    segment,
)
from memoryhub_client.models import Chunk, Document, Page

__all__ = [
    "UploadSource",
    "document_chunks_page",
    "document_delete",
    "document_get",
    "document_reingest",
    "document_upload",
    "document_upload_text",
    "documents_page",
]

UploadSource = bytes | str | os.PathLike[str] | IO[bytes]


def _file_part(file: UploadSource, filename: str | None) -> tuple[str, bytes, str]:
    """(name, bytes, content type) of what to upload. The bytes are read once, here,
    so that every retry sends the same body."""
    if isinstance(file, (bytes, bytearray)):
        name, content = filename or "upload", bytes(file)
    elif isinstance(file, (str, os.PathLike)):
        path = Path(file)
        name, content = filename or path.name, path.read_bytes()
    else:
        name = filename or Path(str(getattr(file, "name", "upload"))).name
        content = file.read()
    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return name, content, kind


def document_upload(
    file: UploadSource,
    *,
    filename: str | None = None,
    title: str | None = None,
    source: str | None = None,
    user: str | None = None,
    chunker: str | None = None,
    chunker_settings: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Call[Document]:
    """Upload a document (PDF, Word, Markdown, HTML, JSON, text): ``file`` is bytes, a
    path or a binary file. Without ``user`` the whole project's searches find it. The
    answer is queued (or ``duplicate``: the same bytes were there); see
    ``wait_until_done``."""
    fields = {
        "title": title,
        "source": source,
        "user": user,
        "chunker": chunker,
        "chunker_settings": json.dumps(chunker_settings) if chunker_settings is not None else None,
        "metadata": json.dumps(metadata) if metadata is not None else None,
    }
    data = {name: value for name, value in fields.items() if value is not None}
    files = {"file": _file_part(file, filename)}
    return Call("POST", "documents/", as_model(Document), files=files, data=data)


def document_upload_text(
    text: str,
    *,
    source: str,
    title: str | None = None,
    user: str | None = None,
    chunker: str | None = None,
    chunker_settings: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Call[Document]:
    """Upload a text under the name of its ``source`` (``.md`` reads as Markdown)."""
    payload = body(
        text=text,
        source=source,
        title=title,
        user=user,
        chunker=chunker,
        chunker_settings=chunker_settings,
        metadata=metadata,
    )
    return Call("POST", "documents/", as_model(Document), json=payload)


def documents_page(
    *,
    status: str | None = None,
    user: str | None = None,
    scope: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[Document]]:
    """The project's documents by ``status``, ``user`` and ``scope`` (project, user)."""
    params = query(status=status, user=user, scope=scope, limit=limit, cursor=cursor)
    return Call("GET", "documents/", as_page(Document), params=params)


def document_get(document_id: str) -> Call[Document]:
    """A document's status, progress, error and timings."""
    path = f"documents/{segment(document_id, 'document_id')}/"
    return Call("GET", path, as_model(Document))


def document_chunks_page(
    document_id: str,
    *,
    status: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[Chunk]]:
    """A document's chunks in order with their citations (``status="staged"``: the
    version being ingested)."""
    path = f"documents/{segment(document_id, 'document_id')}/chunks/"
    params = query(status=status, limit=limit, cursor=cursor)
    return Call("GET", path, as_page(Chunk), params=params)


def document_reingest(
    document_id: str,
    *,
    chunker: str | None = None,
    chunker_settings: Mapping[str, Any] | None = None,
) -> Call[Document]:
    """Ingest the stored bytes again as a new version (optionally another chunker)."""
    path = f"documents/{segment(document_id, 'document_id')}/reingest/"
    payload = body(chunker=chunker, chunker_settings=chunker_settings)
    return Call("POST", path, as_model(Document), json=payload)


def document_delete(document_id: str) -> Call[None]:
    """Delete a document with its chunks and vectors (each deletion recorded)."""
    path = f"documents/{segment(document_id, 'document_id')}/"
    return Call("DELETE", path, as_nothing, gone_ok=True)
