"""Parsing an upload, here or in a child process bounded in time and memory."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .detect import mime_type_detect, text_decode
from .document import DOCX, SUPPORTED_TYPES, TYPE_NAMES, LoaderError, ParsedDocument
from .markup import html_parse, json_parse, markdown_parse, plain_parse
from .office import docx_parse, pdf_parse

_TEXT_PARSERS: dict[str, Callable[[str], ParsedDocument]] = {
    "text/plain": plain_parse,
    "text/markdown": markdown_parse,
    "text/html": html_parse,
    "application/json": json_parse,
}
_BINARY_PARSERS: dict[str, Callable[[bytes], ParsedDocument]] = {
    "application/pdf": pdf_parse,
    DOCX: docx_parse,
}
# the directory that holds the ingestion package: the child imports it from there
_SOURCE_ROOT = str(Path(__file__).resolve().parents[2])
# the child's exit status for "ran out of memory" (EX_TEMPFAIL, not used by Python)
EXIT_OUT_OF_MEMORY = 75


def document_parse(
    data: bytes, *, filename: str = "", mime_type: str | None = None
) -> ParsedDocument:
    """Parse in this process; LoaderError with a clear message for what cannot be read.
    ``mime_type`` (one of SUPPORTED_TYPES) skips the detection."""
    if not data:
        raise LoaderError("empty document: the file holds no bytes")
    mime_type = mime_type or mime_type_detect(data, filename)
    if mime_type in _BINARY_PARSERS:
        return _BINARY_PARSERS[mime_type](data)
    if mime_type in _TEXT_PARSERS:
        return _TEXT_PARSERS[mime_type](text_decode(data, filename))
    raise LoaderError(f"unsupported file type {mime_type}: supported are {TYPE_NAMES}")


def document_parse_bounded(
    data: bytes,
    *,
    filename: str = "",
    mime_type: str | None = None,
    timeout_seconds: float = 60.0,
    memory_mb: int = 1024,
) -> ParsedDocument:
    """document_parse in a child process limited in time and memory, so that a hostile
    file cannot take the worker down; LoaderError when it runs out of either.

    The child is a fresh interpreter started with subprocess (Celery's prefork children
    are daemonic and may not start multiprocessing children): ``python -m
    ingestion.parse_child``, the bytes on its stdin, the result as JSON on its stdout.
    It limits its own address space (RLIMIT_AS) and CPU time (RLIMIT_CPU) before it
    reads a byte, which is preexec_fn's effect without its hazard in a threaded
    parent; the wall-clock ``timeout_seconds`` is enforced here."""
    if mime_type is not None and mime_type not in SUPPORTED_TYPES:
        raise LoaderError(f"unsupported file type {mime_type}: supported are {TYPE_NAMES}")
    command = [
        sys.executable,
        "-m",
        "ingestion.parse_child",
        "--filename",
        filename,
        "--mime-type",
        mime_type or "",
        "--memory-mb",
        str(memory_mb),
        "--cpu-seconds",
        str(math.ceil(timeout_seconds)),
    ]
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [_SOURCE_ROOT, os.environ.get("PYTHONPATH")])),
    }
    try:
        finished = subprocess.run(
            command,
            input=data,
            capture_output=True,
            timeout=timeout_seconds,
            env=environment,
            check=False,
        )
    except subprocess.TimeoutExpired:  # run() has killed the child
        raise LoaderError(_too_long(timeout_seconds)) from None
    return _child_result(finished, timeout_seconds=timeout_seconds, memory_mb=memory_mb)


def _child_result(
    finished: subprocess.CompletedProcess[bytes], *, timeout_seconds: float, memory_mb: int
) -> ParsedDocument:
    if finished.returncode == 0:
        try:
            reply = json.loads(finished.stdout)
        except ValueError:
            raise LoaderError("the parser's answer was unreadable") from None
        if "error" in reply:
            raise LoaderError(reply["error"])
        return ParsedDocument.from_json(reply["document"])
    if finished.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        # RLIMIT_CPU sends SIGXCPU at the soft limit and SIGKILL at the hard one
        raise LoaderError(_too_long(timeout_seconds))
    if finished.returncode == EXIT_OUT_OF_MEMORY or b"MemoryError" in finished.stderr:
        raise LoaderError(f"parsing needed more than {memory_mb} MB of memory")
    last_line = (finished.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[
        -1
    ]
    raise LoaderError(f"the parser failed (exit status {finished.returncode}): {last_line}"[:300])


def _too_long(timeout_seconds: float) -> str:
    return f"parsing took longer than {timeout_seconds:g} s"
