import json
import time
import uuid
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from ingestion.models import Document
from ingestion.services.documents import (
    DocumentRejected,
    DocumentUpload,
    chunker_resolve,
    document_create,
)
from memories.management.commands.export_user import project_find
from memories.models import Project

# what a folder is searched for (a file named on the command line is always tried: its
# type comes from its content)
EXTENSIONS = {".txt", ".text", ".md", ".markdown", ".html", ".htm", ".json", ".pdf", ".docx"}


def files_of(paths: list[str]) -> list[tuple[Path, str]]:
    """(file, source name) for each file given and each supported file under each
    folder given (recursively, the source being its path within the folder)."""
    found: list[tuple[Path, str]] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += [
                (file, file.relative_to(path).as_posix())
                for file in sorted(path.rglob("*"))
                if file.is_file() and file.suffix.lower() in EXTENSIONS
            ]
        elif path.is_file():
            found.append((path, path.name))
        else:
            raise CommandError(f"No such file or folder: {name}")
    return found


class Command(BaseCommand):
    help = (
        "Ingest files, or every PDF, DOCX, Markdown, HTML, JSON and text file under folders, "
        "as knowledge of a project (or of one user), with a progress bar. Uses the same "
        "service as POST /api/v1/documents/: the same bytes are not ingested twice, a "
        "changed file replaces its earlier version. The worker does the parsing and "
        "embedding; --wait follows it until every document is done."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument("--project", help="project name or id (default: the only one)")
        parser.add_argument("--user", help="attach to this end user (external id)")
        parser.add_argument("--chunker", help="token_window or recursive (default: project's)")
        parser.add_argument(
            "--chunker-settings", type=json.loads, help="e.g. '{\"window_size\": 256}'"
        )
        parser.add_argument("--metadata", type=json.loads, help="JSON object for every chunk")
        parser.add_argument("--wait", action="store_true", help="follow until all are done")
        parser.add_argument(
            "--timeout", type=float, default=0, help="with --wait: give up after this many s"
        )

    def handle(self, *args: Any, paths: list[str], **options: Any) -> None:
        project = self.project_get(options["project"])
        try:  # a bad chunker is refused once, not once per file
            chunker_resolve(
                project=project, chunker=options["chunker"], given=options["chunker_settings"]
            )
        except DocumentRejected as error:
            raise CommandError(f"{error.field}: {error}") from None
        files = files_of(paths)
        if not files:
            raise CommandError("No supported files found.")
        queued: list[Document] = []
        duplicates = rejected = 0
        for path, source in tqdm(files, unit="file", disable=None):
            upload = DocumentUpload(
                data=path.read_bytes(),
                source=source,
                user=options["user"],
                chunker=options["chunker"],
                chunker_settings=options["chunker_settings"],
                metadata=options["metadata"] or {},
            )
            try:
                result = document_create(project=project, upload=upload)
            except DocumentRejected as error:
                rejected += 1
                self.stderr.write(f"{path}: skipped: {error}")
                continue
            if result.duplicate:
                duplicates += 1
            else:
                queued.append(result.document)
        self.stdout.write(
            f"Queued {len(queued)} documents ({duplicates} already there, {rejected} skipped)."
        )
        if options["wait"] and queued:
            self.follow([document.pk for document in queued], options["timeout"])

    def project_get(self, value: str | None) -> Project:
        if value is not None:
            return project_find(value)
        projects = list(Project.objects.order_by("pk")[:2])
        if len(projects) != 1:
            raise CommandError(f"Name the project with --project ({len(projects)} found).")
        return projects[0]

    def follow(self, document_ids: list[uuid.UUID], timeout: float) -> None:
        """A progress bar of the chunks embedded until every document is finished."""
        deadline = time.monotonic() + timeout if timeout else None
        with tqdm(unit="chunk", disable=None) as bar:
            while True:
                documents = list(Document.objects.filter(pk__in=document_ids))
                bar.total = sum(document.chunks_total for document in documents)
                bar.update(sum(document.progress["done"] for document in documents) - bar.n)
                if all(document.status not in Document.UNFINISHED for document in documents):
                    break
                if deadline is not None and time.monotonic() > deadline:
                    raise CommandError("Timed out; the documents go on in the worker.")
                time.sleep(0.5)
        failed = [document for document in documents if document.status == Document.Status.FAILED]
        for document in failed:
            self.stderr.write(f"{document.source}: failed: {document.error}")
        done = len(documents) - len(failed)
        chunks = sum(d.chunks_total for d in documents if d.status == Document.Status.DONE)
        self.stdout.write(f"Done: {done} documents, {chunks} chunks; {len(failed)} failed.")
        if failed:
            raise CommandError(f"{len(failed)} documents failed.")
