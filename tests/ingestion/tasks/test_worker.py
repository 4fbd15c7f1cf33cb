"""End to end with a real Celery worker and the real embedding model: files the tests
generate go in through the API and come out as searchable, citable knowledge."""

from __future__ import annotations

import pytest

from ingestion.models import Document
from memories.models import Memory
from tests.conftest import wait_until
from tests.ingestion import files
from tests.ingestion.conftest import upload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]
SMALL = '{"chunk_size": 200, "chunk_overlap": 0}'


def finished(*ids: str, timeout: float = 180.0) -> dict[str, Document]:
    """The documents once none of them is queued or in progress."""

    def done():
        documents = {str(d.pk): d for d in Document.objects.filter(pk__in=ids)}
        if all(d.status not in Document.UNFINISHED for d in documents.values()):
            return documents
        return None

    return wait_until(done, timeout=timeout, interval=0.3)


def search(client, query: str, **params) -> list[dict]:
    response = client.post(
        "/api/v1/search/", {"query": query, "kind": ["knowledge"], "k": 5, **params}
    )
    assert response.status_code == 200, response.content
    return response.json()["results"]


def found(hits: list[dict], text: str) -> dict:
    """The hit among the first three that holds ``text``."""
    holding = [hit for hit in hits[:3] if text in hit["memory"]["content"]]
    assert holding, [hit["memory"]["content"][:60] for hit in hits]
    return holding[0]


def test_real_files_become_searchable_citable_knowledge(owner, celery_worker_process):
    docx = files.docx_bytes(
        [(1, "Onboarding"),
         (0, "New staff get their badge from the front desk on day one, together with a "
             "laptop, a locker key and the schedule of their first week."),
         (2, "Parking"),
         (0, "Visitors park on level minus two of the garage and register their number "
             "plate at the reception before they leave the building.")],
        title="Staff handbook",
    )  # fmt: skip
    uploads = {
        "manual.pdf": files.pdf_bytes(files.PDF_PAGES, title=files.PDF_TITLE),
        "handbook.docx": docx,
        "guide.md": files.markdown_bytes(),
        "refunds.html": files.html_bytes(),
        "faq.json": files.json_bytes(),
    }
    ids = {}
    for name, data in uploads.items():
        response = upload(owner.client, name, data, chunker="recursive", chunker_settings=SMALL)
        assert response.status_code == 202, response.content
        ids[name] = response.json()["id"]

    documents = finished(*ids.values())
    for name, document_id in ids.items():
        body = owner.client.get(f"/api/v1/documents/{document_id}/").json()
        assert body["status"] == "done", (name, body["error"])
        assert body["progress"]["done"] == body["progress"]["total"] > 0
        assert body["progress"]["percent"] == 100.0
    assert documents[ids["manual.pdf"]].title == files.PDF_TITLE

    hit = found(search(owner.client, "How often should the coffee machine be descaled?"), "90 days")
    assert hit["memory"]["content_json"]["page"] == 2
    assert hit["memory"]["content_json"]["document"]["source"] == "manual.pdf"

    hit = found(search(owner.client, "where do visitors park their car?"), "level minus two")
    assert hit["memory"]["content_json"]["heading"] == ["Onboarding", "Parking"]

    found(search(owner.client, "can I get my money back for a gift card?"), "Gift cards")
    faq = search(owner.client, "which database does it use?", document=ids["faq.json"])
    found(faq, "pgvector")
    assert {hit["memory"]["document_id"] for hit in faq} == {ids["faq.json"]}


def test_hostile_files_fail_and_the_worker_carries_on(owner, celery_worker_process):
    bad = {
        "locked.pdf": files.encrypted_pdf_bytes(["Secret plans."]),
        "bomb.docx": files.zip_bomb_docx_bytes(300),
        "scan.pdf": files.blank_pdf_bytes(2),
    }
    ids = [upload(owner.client, name, data).json()["id"] for name, data in bad.items()]
    good = upload(owner.client, "after.md", b"# After\n\nThe worker is still alive.").json()
    documents = finished(*ids, good["id"])
    errors = {documents[i].source: documents[i].error for i in ids}
    assert all(documents[i].status == "failed" for i in ids), errors
    assert "encrypted" in errors["locked.pdf"]
    assert "zip bomb" in errors["bomb.docx"]
    assert "no text" in errors["scan.pdf"]
    assert not Memory.objects.filter(document_id__in=ids).exists()
    assert documents[good["id"]].status == "done"


def test_a_changed_document_is_swapped_whole(owner, celery_worker_process):
    """Watched from this connection while the worker re-ingests: the active chunks are
    always exactly one version's."""
    pages = files.prose_pages(4, words_per_page=250, seed=1)
    first = upload(
        owner.client, "ops.pdf", files.pdf_bytes(pages), chunker="recursive", chunker_settings=SMALL
    ).json()
    finished(first["id"])
    old = set(Memory.objects.filter(document_id=first["id"]).values_list("pk", flat=True))
    assert old

    changed = [pages[0], *files.prose_pages(3, words_per_page=250, seed=2)]
    second = upload(
        owner.client, "ops.pdf", files.pdf_bytes(changed), chunker="recursive",
        chunker_settings=SMALL,
    ).json()  # fmt: skip
    assert (second["id"], second["version"]) == (first["id"], 2)

    def swapped():
        active = set(
            Memory.objects.filter(document_id=first["id"], status="active").values_list(
                "pk", flat=True
            )
        )
        assert active == old or not active & old, "old and new chunks active at once"
        document = Document.objects.get(pk=first["id"])
        return document.status == "done" and document.served_version == 2

    wait_until(swapped, timeout=180, interval=0.05)
    # the last poll may have read the chunks just before the publishing commit and the
    # document just after it: the new version is checked once more, now it is served
    active = set(
        Memory.objects.filter(document_id=first["id"], status="active").values_list("pk", flat=True)
    )
    assert active and not active & old
    document = Document.objects.get(pk=first["id"])
    active = Memory.objects.filter(document_id=first["id"], status="active")
    assert active.count() == document.chunks_total > 0
    assert not Memory.objects.filter(document_id=first["id"]).exclude(status="active").exists()


def test_a_users_document_stays_out_of_other_users_searches(owner, celery_worker_process):
    secret = "Alice keeps the spare key of the boat under the blue flower pot."
    response = owner.client.post(
        "/api/v1/documents/", {"text": secret, "source": "notes.txt", "user": "alice"}
    )
    owner.client.post("/api/v1/users/", {"external_id": "bob"})
    finished(response.json()["id"])
    query = "where is the spare key of the boat?"
    assert [h["memory"]["content"] for h in search(owner.client, query, user="alice")] == [secret]
    for mode in ("vector", "keyword", "hybrid", "auto"):
        assert search(owner.client, query, user="bob", mode=mode) == []
