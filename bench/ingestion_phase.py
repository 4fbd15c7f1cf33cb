"""The documents phase of bench/run.py: end-to-end ingestion of one 200-page PDF.

A 200-page PDF of varied manual-like prose (about 400 words and a heading a page,
written with reportlab by tests/ingestion/files.py) is uploaded through POST
/api/v1/documents/ (multipart `file`; the project's chunker, token_window 512/50 by
default), and GET /api/v1/documents/{id}/ is polled every POLL_SECONDS until it is
`done` (every chunk embedded and published) or `failed`. Reported: pages/s and
chunks/s from the upload's first byte to `done` (client clock; the server's
created_at..finished_at beside it), the stages the document reports (timings: parse_ms,
chunk_ms, embed_ms, total_ms) and when the client first saw each status, beside the
bare model's throughput: the run's raw model figure (LoCoMo turns, ~34 tokens) and the
bare model on this document's own chunks, in this process, in batches of the
ingestion's INGESTION_EMBED_BATCH_SIZE, in chunk order as the worker takes them. The
document is deleted afterwards (its chunks and vectors with it), so that the phases
after this one measure the same memories as without it.

Figures go to ``results["documents"]``; documents_report prints them.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import uuid
from datetime import datetime
from typing import Any

from bench.client import Api, ApiError
from bench.phases import Bench
from bench.tables import table

DOCUMENT_PHASES = ("documents",)
PAGES = 200
WORDS_PER_PAGE = 400
POLL_SECONDS = 0.25
STALL_SECONDS = 300.0  # no progress this long: the run stops with an error
CHUNKS_PAGE = 500
MODEL_MAX_WORDPIECES = 256  # all-MiniLM-L6-v2's max_seq_length: longer chunks are cut


def document_phases_run(bench: Bench, names: tuple[str, ...] = DOCUMENT_PHASES) -> None:
    """A try-out's --only: the documents phase if it is named."""
    if "documents" in names:
        document_phase(bench)


def document_phase(
    bench: Bench, *, pages: int = PAGES, words_per_page: int = WORDS_PER_PAGE
) -> None:
    """Generate, upload and follow one PDF to `done`; the figures to results["documents"]."""
    from tests.ingestion.files import pdf_bytes, prose_pages

    bench.wait_embedded("before documents")
    texts = prose_pages(pages, words_per_page=words_per_page, seed=2024)
    data = pdf_bytes(texts, title=f"Operations manual ({pages} pages)")
    name = "documents"
    bench.phase(
        name,
        f"documents: a {pages}-page PDF ({len(data) / 2**20:.1f} MiB, "
        f"{sum(len(t.split()) for t in texts):,} words) uploaded, until every chunk is embedded",
    )
    load_before = os.getloadavg()
    started = time.perf_counter()
    created, upload_ms = document_upload(bench.api, f"manual-{pages}-pages.pdf", data)
    document, seen = document_follow(bench.api, created["id"], started)
    seconds = time.perf_counter() - started
    if document["status"] != "done":
        raise RuntimeError(f"documents: the PDF ended {document['status']}: {document['error']}")
    chunks = document_chunk_texts(bench.api, document["id"])
    figures = document_figures(document, seconds, pages, len(chunks))
    bench.results["documents"] = {
        **figures,
        "pdf_bytes": len(data),
        "words": sum(len(t.split()) for t in texts),
        "upload_ms": round(upload_ms, 1),
        "status_seen_at_seconds": seen,
        "raw_model_per_second": bench.results.get("raw_model", {}).get("per_second"),
        "bare_model_on_chunks": bare_model_on_chunks(bench, chunks),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "foreign_cpu_cores": bench.foreign(name),
    }
    status, _, _ = bench.api.call("DELETE", f"/api/v1/documents/{document['id']}/")
    if status != 204:
        raise ApiError(f"DELETE the benchmark's document: {status}")


def document_upload(api: Api, filename: str, data: bytes) -> tuple[dict[str, Any], float]:
    """POST /api/v1/documents/ as multipart/form-data on a connection of its own: (the
    created document, milliseconds of the round trip)."""
    boundary = uuid.uuid4().hex
    head = (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/pdf\r\n\r\n"
    )
    body = head.encode() + data + f"\r\n--{boundary}--\r\n".encode()
    headers = {
        "Authorization": api.headers["Authorization"],
        "Content-Type": f"multipart/form-data; boundary={boundary}",
    }
    connection = http.client.HTTPConnection("127.0.0.1", api.port, timeout=300)
    try:
        started = time.perf_counter()
        connection.request("POST", "/api/v1/documents/", body=body, headers=headers)
        response = connection.getresponse()
        raw = response.read()
        elapsed = (time.perf_counter() - started) * 1000
    finally:
        connection.close()
    if response.status not in (200, 202):  # 200: these bytes were there already
        raise ApiError(f"POST /api/v1/documents/: {response.status} {raw[:500]!r}")
    return json.loads(raw), elapsed


def document_follow(
    api: Api, document_id: str, started: float
) -> tuple[dict[str, Any], dict[str, float]]:
    """Poll the document until done or failed: (its last state, the seconds since
    ``started`` at which each status was first seen)."""
    seen: dict[str, float] = {}
    last_change, last_state, last_print = time.monotonic(), None, time.monotonic()
    while True:
        document = api.get(f"/api/v1/documents/{document_id}/")
        status = document["status"]
        seen.setdefault(status, round(time.perf_counter() - started, 2))
        if status in ("done", "failed"):
            return document, seen
        state = (status, document["progress"]["done"])
        if state != last_state:
            last_state, last_change = state, time.monotonic()
        elif time.monotonic() - last_change > STALL_SECONDS:
            raise RuntimeError(f"documents: no progress for {STALL_SECONDS:.0f} s at {state}")
        if time.monotonic() - last_print > 30:
            progress = document["progress"]
            print(f"    documents: {status}, {progress['done']}/{progress['total']}", flush=True)
            last_print = time.monotonic()
        time.sleep(POLL_SECONDS)


def document_chunk_texts(api: Api, document_id: str) -> list[str]:
    """The served chunks' texts in chunk order."""
    texts: list[tuple[int, str]] = []
    cursor = ""
    while True:
        page = api.get(
            f"/api/v1/documents/{document_id}/chunks/?limit={CHUNKS_PAGE}"
            + (f"&cursor={cursor}" if cursor else "")
        )
        texts.extend((chunk["chunk_index"], chunk["content"]) for chunk in page["results"])
        cursor = page.get("next_cursor") or ""
        if not cursor:
            return [text for _, text in sorted(texts)]


def document_figures(
    document: dict[str, Any], seconds: float, pages: int, chunks: int
) -> dict[str, Any]:
    """Throughput from the client's clock and the server's stages."""
    timings = document.get("timings") or {}
    created = datetime.fromisoformat(document["created_at"])
    finished = datetime.fromisoformat(document["finished_at"])
    embed_seconds = timings.get("embed_ms", 0) / 1000
    return {
        "pages": pages,
        "chunks": chunks,
        "chunker": document["chunker"],
        "chunker_settings": document["chunker_settings"],
        "seconds": round(seconds, 2),
        "pages_per_second": round(pages / seconds, 2),
        "chunks_per_second": round(chunks / seconds, 2),
        "server_seconds": round((finished - created).total_seconds(), 2),
        "timings_ms": timings,
        # total_ms less the named stages: writing the chunks, task hand-offs, publishing
        "other_ms": timings.get("total_ms", 0)
        - sum(timings.get(k, 0) for k in ("parse_ms", "chunk_ms", "embed_ms")),
        # the embedding stage alone (the worker's time inside its embedding batches)
        "embed_chunks_per_second": round(chunks / embed_seconds, 2) if embed_seconds else None,
    }


def bare_model_on_chunks(bench: Bench, chunks: list[str]) -> dict[str, Any]:
    """The bare model on these chunks in this process, a batch of the ingestion's size
    per call, in chunk order; and how many chunks exceed what the model reads."""
    size = int(os.environ.get("INGESTION_EMBED_BATCH_SIZE", "32"))
    bench.embed(chunks[:size])  # loads the model (once per run) and warms it
    model = bench._model  # loaded by bench.embed: the run's one copy
    wordpieces = [n + 2 for n in model.token_counts(chunks)]  # with the model's two markers
    max_seq_length = int(model.runtime.max_seq_length)
    started = time.perf_counter()
    for first in range(0, len(chunks), size):
        bench.embed(chunks[first : first + size])
    seconds = time.perf_counter() - started
    return {
        "batch_size": size,
        "seconds": round(seconds, 2),
        "per_second": round(len(chunks) / seconds, 2),
        "mean_wordpieces": round(sum(wordpieces) / len(wordpieces), 1),
        "max_seq_length": max_seq_length,
        "chunks_cut_by_model": sum(1 for n in wordpieces if n > max_seq_length),
    }


def documents_report(results: dict[str, Any]) -> None:
    """The documents phase's lines of the console report."""
    figures = results.get("documents")
    if not figures:
        return
    settings = ", ".join(f"{k} {v}" for k, v in figures["chunker_settings"].items())
    bare = figures["bare_model_on_chunks"]
    print(
        f"\nDocument ingestion: a {figures['pages']}-page PDF ({figures['words']:,} words, "
        f"{figures['pdf_bytes'] / 2**20:.1f} MiB), {figures['chunker']} ({settings}): "
        f"{figures['chunks']:,} chunks, from the upload's first byte until every chunk is "
        "embedded and published"
    )
    rows = [
        ["hub, end to end (client clock)", figures["pages_per_second"],
         figures["chunks_per_second"], figures["seconds"], figures.get("foreign_cpu_cores")],
        ["hub, embedding stage only (embed_ms)", None, figures["embed_chunks_per_second"],
         round(figures["timings_ms"].get("embed_ms", 0) / 1000, 2), None],
        [f"bare model on these chunks, {bare['batch_size']} per call", None,
         bare["per_second"], bare["seconds"], None],
    ]  # fmt: skip
    print(table(["", "pages/s", "chunks/s", "seconds", "other CPU"], rows))
    timings = ", ".join(f"{k} {v:,}" for k, v in figures["timings_ms"].items())
    seen = ", ".join(f"{k} {v}" for k, v in figures["status_seen_at_seconds"].items())
    print(
        f"  server stages (ms): {timings} (other: {figures['other_ms']:,}); "
        f"created..finished {figures['server_seconds']} s; "
        f"upload round trip {figures['upload_ms']} ms\n"
        f"  status first seen at (s): {seen}\n"
        f"  bare model on LoCoMo turns (raw model phase): "
        f"{_or_dash(figures['raw_model_per_second'])} texts/s; chunks average "
        f"{bare['mean_wordpieces']} word pieces, {bare['chunks_cut_by_model']} of "
        f"{figures['chunks']} longer than the model's {bare['max_seq_length']} (the hub embeds "
        f"them as windows; the bare model row reads only their first {bare['max_seq_length']})\n"
        f"  load average before {figures['load_average_before']}, after "
        f"{figures['load_average_after']}"
    )


def _or_dash(value: Any) -> str:
    return "-" if value is None else f"{value:,}"
