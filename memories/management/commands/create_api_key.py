from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memories.services.projects import api_key_create, project_get_or_create


class Command(BaseCommand):
    help = (
        "Create an API key for a project (created if needed). Prints only the key on stdout, "
        "so scripts can capture it; what was made goes to stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project name")
        parser.add_argument("--name", default="", help="a label for the key")
        parser.add_argument("--read-only", action="store_true", help="read scope only")

    def handle(self, *args: Any, project: str, name: str, read_only: bool, **options: Any) -> None:
        project_row, created = project_get_or_create(name=project)
        key, raw_key = api_key_create(project=project_row, name=name, read_only=read_only)
        self.stderr.write(
            f"{'Created project ' + repr(project_row.name) + ' and ' if created else ''}"
            f"{'read-only' if read_only else 'read-write'} key {key.prefix}… for project "
            f"{project_row.name!r} (shown once, stored hashed)"
        )
        self.stdout.write(raw_key)
