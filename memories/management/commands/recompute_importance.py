from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from memories.management.commands.export_user import project_find
from memories.services.importance import importance_recompute, importance_recompute_total


class Command(BaseCommand):
    help = (
        "Recompute the importance scores (MUXI: recency, access frequency, explicit "
        "importance) of every project's memories, or one project's, here and now (with a "
        "progress bar); beat does it every IMPORTANCE_RECOMPUTE_INTERVAL seconds."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", help="project name or id (default: every project)")

    def handle(self, *args: Any, project: str | None, **options: Any) -> None:
        row = project_find(project) if project is not None else None
        total = importance_recompute_total(project=row)
        with tqdm(total=total, unit="memory", disable=None) as bar:
            changed = importance_recompute(project=row, progress=bar.update)
        self.stdout.write(f"Recomputed {total} importance scores, {changed} changed.")
