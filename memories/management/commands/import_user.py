import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memories.management.commands.export_user import project_find
from memories.services.export_checks import ExportInvalid
from memories.services.imports import export_document_import
from memories.services.revisions import Actor


class Command(BaseCommand):
    help = (
        "Import a document written by `manage.py export_user` (or GET .../export/) into a "
        "project, all or nothing, with a progress bar: memories keep their ids and times, "
        "those the project has already are skipped. Same as POST /api/v1/import/."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project name or id")
        parser.add_argument("file", help="the export document ('-' for stdin)")

    def handle(self, *args: Any, project: str, file: str, **options: Any) -> None:
        project_row = project_find(project)
        try:
            if file == "-":
                document = json.load(sys.stdin)
            else:
                with open(file, encoding="utf-8") as stream:
                    document = json.load(stream)
        except OSError as error:
            raise CommandError(f"Cannot read {file}: {error.strerror}.") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise CommandError(f"{file} is not a JSON document: {error}.") from None
        memories = document.get("memories") if isinstance(document, dict) else None
        total = len(memories) if isinstance(memories, list) else 0
        try:
            with tqdm(total=total, unit="memory", disable=None, file=sys.stderr) as bar:
                report = export_document_import(
                    project=project_row,
                    document=document,
                    actor=Actor.system("import_user"),
                    progress=bar.update,
                )
        except ExportInvalid as error:
            lines = [f"  {path}: {' '.join(messages)}" for path, messages in error.errors.items()]
            raise CommandError(
                "Nothing was imported; the document is invalid:\n" + "\n".join(lines)
            ) from None
        counts = [
            f"{part} {report_part['created']} created, {report_part['existing']} existing"
            for part, report_part in (
                ("users", report.users),
                ("rooms", report.rooms),
                ("agents", report.agents),
            )
        ]
        self.stdout.write(
            f"Imported into project {project_row.name!r}: memories {report.memories['created']} "
            f"created, {report.memories['skipped']} skipped; {'; '.join(counts)}; vectors "
            f"{report.vectors['stored']} stored, {report.vectors['ignored']} ignored."
        )
        for note in report.notes:
            self.stdout.write(note)
