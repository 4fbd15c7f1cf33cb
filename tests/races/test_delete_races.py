"""Deletes that race the worker (issue 45): deleting a memory, a user, a room or a
project while a real worker embeds, summarizes, mines facts or ingests a document for
it always succeeds, leaves nothing of what it deleted, keeps the revisions exact, and
the worker drops its late write and carries on.

Each pair runs in both orders, every time (tests/races/harness.py): the worker paused
inside its write transaction while the delete runs ("worker first"), and the delete
holding its transaction open while the worker writes late ("delete first").
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection

from ingestion.models import Document
from ingestion.services.documents import DocumentUpload, document_create, document_delete
from ingestion.services.pipeline import document_stage
from memories.models import EndUser, Memory, Project, Room
from memories.providers import redis_client
from memories.services.memories import MemoryInput, memory_create_batch, memory_delete
from memories.services.projects import project_delete
from memories.services.revisions import Actor
from memories.services.users import end_user_delete, room_delete
from tests.conftest import Tenant, wait_until
from tests.races.harness import (
    PAUSES,
    Deleter,
    blocked_by,
    pause_triggers,
    paused_pid,
    task_outcome,
    task_send,
    worker_carries_on,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]
ACTOR = Actor.system("race-test")
TASKS = {
    "embedding": "memories.tasks.embedding_run_task",
    "summary": "synopsis.tasks.room_summarize_task",
    "facts": "synopsis.tasks.facts_extract_task",
    "ingestion": "ingestion.tasks.document_ingest_task",
}
ROOM_SETTINGS = {"buffer": {"max_size": 2, "buffer_multiplier": 2, "summary_batch_size": 2}}
DOCUMENT = "\n\n".join(
    f"Section {n}. The lighthouse keeper logs the weather, the passing ships and the "
    f"state of lamp number {n} every evening before the light goes on."
    for n in range(6)
)


@dataclass
class Scene:
    """What a task works on: a project of its own, a user, a room, the memories."""

    task: str
    project: Project
    user: EndUser
    room: Room
    memories: list[Memory] = field(default_factory=list)
    document: Document | None = None
    deleted: Any = None  # the id of the memory deleted

    def args(self) -> list[Any]:
        return {
            "embedding": [],
            "summary": [self.room.pk],
            "facts": [[str(m.pk) for m in self.memories]],
            "ingestion": [str(self.document.pk) if self.document else ""],
        }[self.task]

    def pause(self, kind: str) -> str:
        """Where the worker is paused: after it inserted what it writes."""
        if self.task == "ingestion":
            return "vectors" if kind == "memory" else "chunks"
        return {"embedding": "vectors", "summary": "summary", "facts": "facts"}[self.task]

    def memory(self) -> Memory:
        """The memory to delete: one the worker works on (a document's first chunk)."""
        if self.task == "ingestion":
            assert self.document is not None
            chunks = Memory.objects.filter(document_id=self.document.pk).order_by("chunk_index")
            self.memories = list(chunks[:1])
        self.deleted = self.memories[0].pk
        return self.memories[0]


def scene_set(task: str, kind: str) -> Scene:
    """The scene of ``task``, written as the API writes (no task sent). A document whose
    chunk is deleted is parsed and chunked first (the worker then embeds them)."""
    tenant = Tenant(f"scene-{uuid.uuid4().hex[:8]}")
    project = tenant.project
    room = Room.objects.create(project=project, external_id="r", settings=ROOM_SETTINGS)
    user = EndUser.objects.create(project=project, external_id="u")
    scene = Scene(task, project, user, room)
    if task == "ingestion":
        upload = DocumentUpload(data=DOCUMENT.encode(), source="log.md", user="u")
        upload.chunker, upload.chunker_settings = (
            "recursive",
            {"chunk_size": 150, "chunk_overlap": 0},
        )
        scene.document = document_create(project=project, upload=upload).document
        if kind == "memory":
            document_stage(document_id=scene.document.pk, version=scene.document.version)
        return scene
    texts = {
        "embedding": [f"note {n} about the tide tables" for n in range(12)],
        "summary": [f"message {n} about the harbour" for n in range(6)],
        "facts": ["I live in Lisbon and I work at Acme Corp."],
    }[task]
    items = [MemoryInput(content=t, user="u", room="r", role="user") for t in texts]
    results = memory_create_batch(project=project, items=items, actor=ACTOR)
    scene.memories = [memory for memory, _ in results]
    return scene


def delete_of(scene: Scene, kind: str) -> Any:
    return {
        "memory": lambda: memory_delete(memory=scene.memory(), actor=ACTOR),
        "user": lambda: end_user_delete(end_user=scene.user, actor=ACTOR),
        "room": lambda: room_delete(room=scene.room, actor=ACTOR),
        "project": lambda: project_delete(project=scene.project),
        "plain project": lambda: Project.objects.get(pk=scene.project.pk).delete(),
        "document": lambda: document_delete(document=scene.document, actor=ACTOR),
    }[kind]


def worker_first(control: Any, scene: Scene, kind: str) -> str:
    """The worker paused in its write transaction while the delete runs."""
    pause = scene.pause(kind)
    args = scene.args()
    control.execute("SELECT pg_advisory_lock(%s)", [PAUSES[pause]])
    try:
        task_id = task_send(TASKS[scene.task], *args)
        worker = wait_until(lambda: paused_pid(control, pause), timeout=90)
        deleter = Deleter(delete_of(scene, kind))
        deleter.start()
        pid = deleter.started_pid()
        # the delete waits for the worker (the lock order), or it did not need to
        wait_until(lambda: deleter.deleted.is_set() or worker in blocking(control, pid))
    finally:
        control.execute("SELECT pg_advisory_unlock(%s)", [PAUSES[pause]])
    deleter.finish()
    return task_outcome(task_id)


def delete_first(control: Any, scene: Scene, kind: str) -> str:
    """The delete holds its transaction open while the worker runs and writes late."""
    args = scene.args()
    deleter = Deleter(delete_of(scene, kind), hold=True)
    deleter.start()
    deleter.deleted.wait(timeout=60)
    try:
        assert deleter.error is None, deleter.error
        task_id = task_send(TASKS[scene.task], *args)
        wait_until(lambda: blocked_by(control, deleter.started_pid()) or ended(task_id), timeout=90)
    finally:
        deleter.commit()
    deleter.finish()
    return task_outcome(task_id)


def blocking(control: Any, pid: int) -> list[int]:
    return control.execute("SELECT pg_blocking_pids(%s)", [pid]).fetchone()[0]


def ended(task_id: str) -> bool:
    try:
        task_outcome(task_id, timeout=0.05)
    except AssertionError:
        return False
    return True


# --- what is left ----------------------------------------------------------------------

# tables without a foreign key to what they name: nothing may name what is gone
ORPHANS = {
    "vector bits without their vector": """
        SELECT count(*) FROM memories_embedding_bits b WHERE NOT EXISTS (
            SELECT 1 FROM memories_embedding e WHERE e.memory_id = b.memory_id
            AND e.space_id = b.space_id AND e."window" = b."window")""",
    "vector bits of a gone project or user": """
        SELECT count(*) FROM memories_embedding_bits b
        WHERE NOT EXISTS (SELECT 1 FROM memories_project p WHERE p.id = b.project_id)
        OR (b.end_user_id IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM memories_enduser u WHERE u.id = b.end_user_id))""",
    "chunks of a gone document": """
        SELECT count(*) FROM memories_memory m WHERE m.document_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM ingestion_document d WHERE d.id = m.document_id)""",
    # revisions outlive their memories by design, and each deletion is recorded
    "gone memories without a delete revision": """
        SELECT count(*) FROM memories_memoryrevision c WHERE c.action = 'create'
        AND NOT EXISTS (SELECT 1 FROM memories_memory m WHERE m.id = c.memory_id)
        AND NOT EXISTS (SELECT 1 FROM memories_memoryrevision d
                        WHERE d.memory_id = c.memory_id AND d.action = 'delete')""",
}
# the columns that name a row of each kind, in any table
NAMING = {
    "document": ("document_id",),
    "memory": ("memory_id", "message_id"),
    "user": ("end_user_id",),
    "room": ("room_id",),
    "project": ("project_id",),
}


def left_behind(kind: str, victim: Any) -> dict[str, int]:
    """Counts of everything that should be gone: orphans anywhere, and rows of any
    table naming the deleted row (but a memory's own revisions, kept by design)."""
    kind = "project" if kind == "plain project" else kind
    found: dict[str, int] = {}
    with connection.cursor() as cursor:
        for name, sql in ORPHANS.items():
            cursor.execute(sql)
            found[name] = cursor.fetchone()[0]
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND column_name = ANY(%s)",
            [list(NAMING[kind])],
        )
        for table, column in cursor.fetchall():
            if table == "memories_memoryrevision" and kind == "memory":
                continue
            cursor.execute(f'SELECT count(*) FROM {table} WHERE "{column}" = %s', [victim])
            found[f"{table}.{column}"] = cursor.fetchone()[0]
    return {name: count for name, count in found.items() if count}


def victim_of(scene: Scene, kind: str) -> Any:
    """The deleted row's id."""
    return {
        "memory": lambda: scene.deleted,
        "user": lambda: scene.user.pk,
        "room": lambda: scene.room.pk,
        "project": lambda: scene.project.pk,
        "plain project": lambda: scene.project.pk,
        "document": lambda: scene.document.pk if scene.document else None,
    }[kind]()


# --- the pairs -------------------------------------------------------------------------

KINDS = ["memory", "user", "room", "project"]
PAIRS = [(task, kind) for task in TASKS for kind in KINDS]


@pytest.fixture
def control(owner: Any, celery_worker_process: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The pause triggers, the connection that pauses the worker; sending paused for
    the scenes' writes (the test sends the one task it races)."""
    monkeypatch.setattr(redis_client, "_paused_until", time.monotonic() + 3600)
    with pause_triggers() as connection_:
        yield connection_


def race(control: Any, owner: Any, task: str, kind: str, order: Any) -> str:
    """Set the scene, run the race in ``order``, check what is left; the task's outcome."""
    scene = scene_set(task, kind)
    outcome = order(control, scene, kind)
    assert left_behind(kind, victim_of(scene, kind)) == {}
    assert outcome == "succeeded", outcome
    worker_carries_on(owner)
    return outcome


@pytest.mark.parametrize(("task", "kind"), PAIRS)
def test_a_delete_while_the_worker_writes_succeeds_and_leaves_nothing(control, owner, task, kind):
    race(control, owner, task, kind, worker_first)


@pytest.mark.parametrize(("task", "kind"), PAIRS)
def test_a_late_write_after_a_delete_is_dropped(control, owner, task, kind):
    race(control, owner, task, kind, delete_first)


@pytest.mark.parametrize("order", [worker_first, delete_first])
def test_a_document_deleted_while_its_chunks_are_written(control, owner, order):
    race(control, owner, "ingestion", "document", order)


def test_a_plain_project_delete_while_the_worker_embeds(control, owner):
    """Project.delete() outside the services (the admin, a shell): the database's ON
    DELETE CASCADE takes the vectors the worker wrote after Django collected them."""
    race(control, owner, "embedding", "plain project", worker_first)


def test_a_late_fact_is_dropped_without_an_error(control, owner):
    """The message's user deleted while it is mined: the facts are not written, the
    user is not created again by them, and the task ends without an error."""
    assert race(control, owner, "facts", "user", delete_first) == "succeeded"
    assert not EndUser.objects.filter(external_id="u").exists()
