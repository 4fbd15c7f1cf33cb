"""`manage.py ingest PATH...`: files and folders into a project's knowledge through
the same service as the API."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from ingestion.models import Document
from memories.models import Project
from tests.ingestion import files


def run(*args, **options) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("ingest", *[str(a) for a in args], stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "guide.md").write_bytes(files.markdown_bytes())
    (tmp_path / "sub" / "refunds.html").write_bytes(files.html_bytes())
    (tmp_path / "sub" / "faq.json").write_bytes(files.json_bytes())
    (tmp_path / "notes.txt").write_bytes(files.text_bytes())
    (tmp_path / "fake.txt").write_bytes(files.binary_bytes())  # not text: refused
    (tmp_path / "image.png").write_bytes(files.binary_bytes())  # not looked at
    return tmp_path


def test_a_folder_is_ingested_recursively_and_not_twice(owner, folder):
    out, err = run(folder, project=owner.project.name)
    assert "Queued 4 documents (0 already there, 1 skipped)." in out
    assert "fake.txt: skipped:" in err and "NUL" in err
    documents = Document.objects.filter(project=owner.project)
    assert sorted(documents.values_list("source", flat=True)) == [
        "guide.md", "notes.txt", "sub/faq.json", "sub/refunds.html",
    ]  # fmt: skip
    assert all(d.status == "queued" and d.end_user is None for d in documents)

    out, _ = run(folder, project=str(owner.project.pk))  # by id this time
    assert "Queued 0 documents (4 already there, 1 skipped)." in out
    (folder / "guide.md").write_bytes(b"# Guide\n\nRewritten.")
    out, _ = run(folder / "guide.md", project=owner.project.name)
    assert "Queued 1 documents (0 already there, 0 skipped)." in out
    assert Document.objects.get(project=owner.project, source="guide.md").version == 2
    assert documents.count() == 4


def test_the_options_reach_the_documents(owner, folder):
    run(
        folder / "guide.md",
        project=owner.project.name,
        user="alice",
        chunker="recursive",
        chunker_settings={"chunk_size": 300},
        metadata={"team": "ops"},
    )
    document = Document.objects.get(project=owner.project)
    assert document.end_user.external_id == "alice"
    assert document.chunker == "recursive"
    assert document.chunker_settings == {"chunk_size": 300, "chunk_overlap": 200}
    assert document.metadata == {"team": "ops"}


def test_mistakes_are_reported_before_anything_is_stored(owner, outsider, folder):
    with pytest.raises(CommandError, match="chunker"):
        run(folder, project=owner.project.name, chunker="sentences")
    with pytest.raises(CommandError, match="window_overlap"):
        run(folder, project=owner.project.name, chunker_settings={"window_overlap": 600})
    with pytest.raises(CommandError, match="No such file or folder"):
        run(folder / "missing.pdf", project=owner.project.name)
    with pytest.raises(CommandError, match="--project"):
        run(folder)  # two projects: which?
    with pytest.raises(CommandError, match="No project"):
        run(folder, project="nope")
    assert not Document.objects.exists()


def test_the_only_project_needs_no_name(db, folder):
    Project.objects.create(name="solo")
    out, _ = run(folder / "notes.txt")
    assert "Queued 1 documents" in out


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_wait_follows_the_worker_to_the_end(owner, folder, celery_worker_process):
    out, err = run(folder, project=owner.project.name, wait=True, timeout=180)
    assert "Done: 4 documents" in out and "0 failed" in out
    assert all(d.status == "done" for d in Document.objects.all())
    (folder / "broken.pdf").write_bytes(files.corrupt_pdf_bytes())
    with pytest.raises(CommandError, match="1 documents failed"):
        run(folder / "broken.pdf", project=owner.project.name, wait=True, timeout=120)
