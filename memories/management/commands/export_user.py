import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memories.models import EndUser, Project, Room
from memories.services.exports import end_user_export, export_memories, room_export


def project_find(value: str) -> Project:
    """The project named ``value``, or with that id."""
    project = Project.objects.filter(name=value).first()
    if project is None and value.isdigit():
        project = Project.objects.filter(pk=int(value)).first()
    if project is None:
        raise CommandError(f"No project named (or with id) {value!r}.")
    return project


class Command(BaseCommand):
    help = (
        "Export a user's memories (all rooms, every status), or a room's with --room, as one "
        "JSON document (the same as GET /api/v1/users/{user}/export/), with a progress bar. "
        "`manage.py import_user` reads it back."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project name or id")
        parser.add_argument("user", nargs="?", help="the user's external id")
        parser.add_argument("--room", help="export this room (external id) instead of a user")
        parser.add_argument("--vectors", action="store_true", help="add the embedding vectors")
        parser.add_argument("-o", "--output", default="-", help="file to write (default stdout)")

    def handle(
        self,
        *args: Any,
        project: str,
        user: str | None,
        room: str | None,
        vectors: bool,
        output: str,
        **options: Any,
    ) -> None:
        if (user is None) == (room is None):
            raise CommandError("Give a user's external id, or --room ROOM (not both).")
        project_row = project_find(project)
        if user is not None:
            end_user = EndUser.objects.for_project(project_row).by_external_id(user).first()
            if end_user is None:
                raise CommandError(f"No user {user!r} in project {project_row.name!r}.")
            total = export_memories(end_user=end_user).count()
            with tqdm(total=total, unit="memory", disable=None, file=sys.stderr) as bar:
                document = end_user_export(end_user=end_user, vectors=vectors, progress=bar.update)
        else:
            room_row = Room.objects.for_project(project_row).by_external_id(room or "").first()
            if room_row is None:
                raise CommandError(f"No room {room!r} in project {project_row.name!r}.")
            total = export_memories(room=room_row).count()
            with tqdm(total=total, unit="memory", disable=None, file=sys.stderr) as bar:
                document = room_export(room=room_row, vectors=vectors, progress=bar.update)
        text = json.dumps(document, ensure_ascii=False)
        if output == "-":
            self.stdout.write(text)
        else:
            with open(output, "w", encoding="utf-8") as file:
                file.write(text + "\n")
            self.stderr.write(
                f"Exported {len(document['memories'])} memories of {document['scope']['type']} "
                f"{document['scope']['id']!r} to {output}"
            )
