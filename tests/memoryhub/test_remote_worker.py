"""A worker on another machine needs only DATABASE_URL and REDIS_URL (issue 43).

The worker here is a real ``celery worker`` process started with nothing of the web's
environment: DATABASE_URL (the test session's embedded PostgreSQL, by its socket),
REDIS_URL (its Redis), an empty data folder of its own (MEMORYHUB_DATA_DIR) and no
SECRET_KEY. A document is uploaded through the web (the API's multipart upload, in
this process, whose data folder is the test session's) and a memory written through
the API; the worker ingests the one and embeds the other. It reads the document's
bytes from PostgreSQL (ingestion.models.DocumentContent) and exports its ONNX
embedding model from the PyPI package into its own folder: nothing of the web's disk.

Not marked ``worker``: it runs before the session's shared worker starts (tests/conftest.py
sorts those last), so the only worker taking these tasks is this one.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from ingestion.models import Document
from memories.models import Memory
from memories.services.workers import HEARTBEAT_PREFIX
from memoryhub import embedded
from tests.conftest import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BASE_DIR = Path(settings.BASE_DIR)
DOCUMENT = (
    "# Field notes\n\n"
    "The lighthouse keeper logs the tide at dawn and again at dusk.\n\n"
    "Ships that pass the northern reef are counted in the red ledger.\n"
)


@dataclass
class RemoteWorker:
    process: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path
    environment: dict[str, str]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def database_url() -> str:
    """The test database on the session's embedded PostgreSQL, as a worker elsewhere
    would be given it (EmbeddedPostgres.url: the host is the socket folder)."""
    server = embedded.postgres_start()
    return dataclasses.replace(server, database=settings.DATABASES["default"]["NAME"]).url


@pytest.fixture
def remote_worker(
    transactional_db: None, tmp_path: Path, redis_server: object
) -> Iterator[RemoteWorker]:
    """A Celery worker on every queue with only the two URLs and an empty data folder."""
    data_dir = tmp_path / "worker-data"
    data_dir.mkdir()
    hostname = f"remote-{uuid.uuid4().hex[:8]}"
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "MEMORYHUB_DATA_DIR": str(data_dir),
    }
    log_path = tmp_path / "remote-worker.log"
    queues = ",".join(queue.name for queue in settings.CELERY_TASK_QUEUES)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "memoryhub", "worker", "--concurrency", "1",
             "--loglevel", "INFO", "--queues", queues, "--hostname", f"{hostname}@%h",
             "--without-mingle", "--without-gossip"],
            env=environment, cwd=BASE_DIR, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    worker = RemoteWorker(process, data_dir, log_path, environment)
    client = redis.Redis.from_url(settings.REDIS_URL)
    deadline = time.monotonic() + 180  # the first start exports the ONNX graphs (~10 s)
    while not any(client.scan_iter(f"{HEARTBEAT_PREFIX}{hostname}@*")):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the remote worker did not start:\n{worker.log()[-3000:]}")
        time.sleep(0.2)
    yield worker
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def upload(client: object, name: str, text: str) -> tuple[str, float]:
    """POST a document through the API; its id and when its response came back."""
    response = client.post(  # type: ignore[attr-defined]
        "/api/v1/documents/",
        {"file": SimpleUploadedFile(name, text.encode())},
        format="multipart",
    )
    assert response.status_code == 202, response.content
    return response.json()["id"], time.monotonic()


def picked_up(document_id: str) -> Document:
    """The document once a worker has begun its pipeline (started_at set)."""
    return wait_until(  # type: ignore[no-any-return]
        lambda: Document.objects.filter(pk=document_id, started_at__isnull=False).first(),
        timeout=60,
        interval=0.005,
    )


def ingested(document_id: str, worker: RemoteWorker) -> Document:
    document: Document = wait_until(
        lambda: Document.objects.filter(pk=document_id, status__in=["done", "failed"]).first(),
        timeout=120,
    )
    assert document.status == Document.Status.DONE, f"{document.error}\n{worker.log()[-2000:]}"
    return document


def test_a_worker_with_only_the_two_urls_ingests_an_upload_and_embeds_a_memory(
    remote_worker: RemoteWorker, owner: object
) -> None:
    client = owner.client  # type: ignore[attr-defined]
    written = client.post(
        "/api/v1/memories/",
        {"user": "maria", "role": "user", "content": "Maria keeps bees on the roof."},
        format="json",
    )
    assert written.status_code == 201, written.content
    memory = wait_until(
        lambda: Memory.objects.filter(
            public_id=written.json()["memory"]["id"], embedding_status="done"
        ).first(),
        timeout=60,
    )
    assert memory.embedded_at is not None

    # the figure: from the upload's response to the worker's start on it, warm worker
    waits, in_database = [], []
    for n in range(5):
        document_id, answered = upload(client, f"notes-{n}.md", f"{DOCUMENT}\nDay {n}.\n")
        document = picked_up(document_id)
        waits.append(time.monotonic() - answered)
        assert document.started_at is not None
        in_database.append((document.started_at - document.created_at).total_seconds())
        document = ingested(document_id, remote_worker)
        chunks = Memory.objects.filter(document_id=document_id, embedding_status="done")
        assert chunks.count() == document.chunks_total > 0
        time.sleep(1)  # the chunks' own embedding run ends: the next upload finds it idle
    waits.sort()
    in_database.sort()
    print(
        f"\nremote worker picked up an upload {waits[2] * 1000:.0f} ms after its response "
        f"(median of 5, max {waits[-1] * 1000:.0f}); started_at - created_at median "
        f"{in_database[2] * 1000:.0f} ms, max {in_database[-1] * 1000:.0f}"
    )

    # the worker did it, from its own folder: the tasks in its log, its own model export,
    # its own SECRET_KEY (nothing it does signs anything), nothing of the web's folder
    log = remote_worker.log()
    assert "ingestion.tasks.document_ingest_task" in log
    assert "memories.tasks.embedding" in log
    assert (remote_worker.data_dir / "models" / "all-MiniLM-L6-v2" / "manifest.json").is_file()
    assert (remote_worker.data_dir / "secret_key").read_text().strip() != settings.SECRET_KEY
    assert not (remote_worker.data_dir / "pg").exists()  # no embedded PostgreSQL started
    assert not (remote_worker.data_dir / "redis").exists()  # nor Redis
    assert "PYTEST_VERSION" not in remote_worker.environment
    assert Path(settings.DATA_DIR) != remote_worker.data_dir
