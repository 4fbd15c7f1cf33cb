from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memories.services.projects import project_get_or_create


class Command(BaseCommand):
    help = "Create a project (tenant); does nothing if it exists."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        project, created = project_get_or_create(name=name)
        self.stdout.write(
            f"{'Created' if created else 'Found'} project {project.name!r} (id {project.pk})"
        )
