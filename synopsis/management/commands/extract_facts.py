from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memories.models import Memory, Project
from synopsis.services.facts import messages_facts_extract

BATCH = 200


class Command(BaseCommand):
    help = (
        "Mine every user message not mined yet for facts (what the workers do in the "
        "background), here and now, with a progress bar: e.g. after turning facts.extract "
        "on for a project that already holds conversations."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", help="Only this project's messages (its name).")

    def handle(self, *args: Any, project: str | None, **options: Any) -> None:
        messages = Memory.objects.filter(
            kind=Memory.Kind.MESSAGE,
            role=Memory.Role.USER,
            end_user__isnull=False,
            fact_extraction__isnull=True,
        )
        if project:
            if not Project.objects.filter(name=project).exists():
                raise CommandError(f"no project named {project!r}")
            messages = messages.filter(project__name=project)
        ids = list(messages.order_by("created_at", "id").values_list("pk", flat=True))
        facts = 0
        with tqdm(total=len(ids), unit="message", disable=None) as bar:
            for start in range(0, len(ids), BATCH):
                chunk = ids[start : start + BATCH]
                facts += messages_facts_extract(memory_ids=chunk)
                bar.update(len(chunk))
        self.stdout.write(f"Mined {len(ids)} messages: {facts} facts created or confirmed.")
