from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memories.management.commands.export_user import project_find
from memories.models import EndUser
from memories.services.pruning import POLICIES, prune_run
from memories.services.revisions import Actor


class Command(BaseCommand):
    help = (
        "Apply a project's pruning policies (its `pruning` settings) here and now, with a "
        "progress bar, recorded as a maintenance run; --dry-run shows what would go and "
        "changes nothing (-v 2 lists the ids). Beat does it (with the purge) every "
        "PRUNE_INTERVAL seconds."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project name or id")
        parser.add_argument("--dry-run", action="store_true", help="report, change nothing")
        parser.add_argument("--user", help="only this user's memories (external id)")
        parser.add_argument(
            "--purge",
            action="store_true",
            help="then delete the memories pruned longer than the retention ago",
        )

    def handle(
        self,
        *args: Any,
        project: str,
        dry_run: bool,
        user: str | None,
        purge: bool,
        **options: Any,
    ) -> None:
        row = project_find(project)
        end_user = None
        if user is not None:
            end_user = EndUser.objects.for_project(row).by_external_id(user).first()
            if end_user is None:
                raise CommandError(f"No user {user!r} in project {row.name!r}.")
        with tqdm(unit="memory", disable=None) as bar:

            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            run = prune_run(
                project=row,
                actor=Actor.system("prune"),
                dry_run=dry_run,
                end_user=end_user,
                progress=progress,
                purge=purge,
            )
        counts = ", ".join(f"{policy} {run.counts[policy]}" for policy in POLICIES)
        verb = "Would prune" if dry_run else "Pruned"
        line = f"{verb} {run.counts['total']} memories ({counts})"
        if not dry_run and run.counts["skipped"]:
            line += f", {run.counts['skipped']} skipped (changed since the plan)"
        if purge:
            line += f"; {'would purge' if dry_run else 'purged'} {run.counts['purged']}"
        self.stdout.write(f"{line}. Run {run.pk}.")
        if dry_run and options["verbosity"] >= 2:  # -v 2: which memories
            for policy in POLICIES:
                for memory_id in run.details["ids"][policy]:
                    self.stdout.write(f"{policy}\t{memory_id}")
            if run.details["truncated"]:
                self.stdout.write("(more ids than a run lists; the counts are exact)")
