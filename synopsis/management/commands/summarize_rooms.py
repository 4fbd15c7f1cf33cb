from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memories.models import Project, Room
from memories.services.buffer import rooms_over_capacity
from synopsis.services.summaries import room_summarize


class Command(BaseCommand):
    help = (
        "Summarize every room holding more unsummarized messages than its buffer capacity "
        "(what the workers do in the background), here and now, with a progress bar."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", help="Only this project's rooms (its name).")
        parser.add_argument("--room", help="Only this room (external id; needs --project).")

    def handle(self, *args: Any, project: str | None, room: str | None, **options: Any) -> None:
        rooms = Room.objects.all()
        if project:
            if not Project.objects.filter(name=project).exists():
                raise CommandError(f"no project named {project!r}")
            rooms = rooms.filter(project__name=project)
        if room:
            if not project:
                raise CommandError("--room needs --project (room ids are per project)")
            rooms = rooms.filter(external_id=room)
        wanted = set(rooms.values_list("pk", flat=True))
        over = [pk for pk in rooms_over_capacity() if pk in wanted]
        written = 0
        for room_id in tqdm(over, unit="room", disable=None):
            written += len(room_summarize(room_id=room_id))
        self.stdout.write(f"Wrote {written} summaries in {len(over)} rooms.")
