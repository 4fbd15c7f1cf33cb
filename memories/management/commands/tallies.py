from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memories.management.commands.export_user import project_find
from memories.models import Project
from memories.services.tallies import tallies_differences, tallies_fold, tallies_rebuild


class Command(BaseCommand):
    help = (
        "The memory tallies the console's counts read (memories.models.tallies): fold "
        "them now (beat does it every TALLIES_FOLD_INTERVAL seconds); --check compares "
        "each project's with a count of its memories (exit 1 on a difference); --rebuild "
        "counts them afresh (holds writes back while a project is counted). Both with a "
        "progress bar over the projects."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", help="project name or id (default: every project)")
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--check", action="store_true", help="compare with the rows")
        action.add_argument("--rebuild", action="store_true", help="count the rows afresh")

    def handle(
        self, *args: Any, project: str | None, check: bool, rebuild: bool, **options: Any
    ) -> None:
        if not (check or rebuild):
            self.stdout.write(f"Folded: {tallies_fold()} tally rows.")
            return
        projects = (
            [project_find(project)] if project is not None else list(Project.objects.order_by("pk"))
        )
        wrong: list[str] = []
        for row in tqdm(projects, unit="project", disable=None):
            if rebuild:
                tallies_rebuild(project=row)
                continue
            for (kind, status, embedding), (tallied, counted) in tallies_differences(
                project=row
            ).items():
                wrong.append(
                    f"{row.name}: {kind}/{status}/{embedding} tallied {tallied}, counted {counted}"
                )
        if rebuild:
            self.stdout.write(f"Rebuilt the tallies of {len(projects)} project(s).")
            return
        for line in wrong:
            self.stdout.write(line)
        if wrong:
            raise CommandError(
                f"{len(wrong)} difference(s); `manage.py tallies --rebuild` repairs them.",
                returncode=1,
            )
        self.stdout.write(f"The tallies of {len(projects)} project(s) agree with their memories.")
