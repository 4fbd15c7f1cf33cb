import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memories.models import EmbeddingSwitch, Project
from memories.services.embedding_spaces import choice_of, model_choices, project_space_read
from memories.services.embedding_switch import (
    SwitchRefused,
    embedding_switch_cancel,
    embedding_switch_run,
    embedding_switch_start,
    switch_progress,
)
from memories.services.revisions import Actor


class Command(BaseCommand):
    help = (
        "Switch a project's embedding model while it keeps serving: every memory is "
        "embedded by the new model (a progress bar here, or a worker's job with "
        "--background), then the project flips to it at once. Without MODEL: the "
        "project's model, the models it can switch to and its last switch."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", help="The project's name.")
        parser.add_argument("model", nargs="?", help="The model to switch to (its key).")
        parser.add_argument(
            "--background", action="store_true", help="Queue the job for a worker and return."
        )
        parser.add_argument("--cancel", action="store_true", help="Cancel the running switch.")

    def handle(self, *args: Any, project: str, model: str | None, **options: Any) -> None:
        found = Project.objects.filter(name=project).first()
        if found is None:
            raise CommandError(f"no project {project!r}")
        actor = Actor.system("switch_model")
        try:
            if options["cancel"]:
                switch = embedding_switch_cancel(project=found, actor=actor)
                self.stdout.write(f"Cancelled switch {switch.pk}; the project keeps its model.")
            elif model is None:
                self._describe(found)
            else:
                self._switch(found, model, actor, background=options["background"])
        except SwitchRefused as error:
            raise CommandError(str(error)) from None

    def _describe(self, project: Project) -> None:
        space = project_space_read(project.pk)
        self.stdout.write(f"{project.name}: {choice_of(space)} ({space.dimension} dimensions)")
        for choice in model_choices().values():
            self.stdout.write(f"  {choice.key}: {choice.description}")
        last = EmbeddingSwitch.objects.filter(project=project).order_by("-started_at").first()
        if last is not None:
            shown = switch_progress(last)
            self.stdout.write(
                f"last switch: {shown['from_model']} -> {shown['to_model']}, {shown['status']}, "
                f"{shown['done']}/{shown['total']}"
            )

    def _switch(self, project: Project, model: str, actor: Actor, *, background: bool) -> None:
        switch = embedding_switch_start(project=project, model=model, actor=actor, queue=background)
        if background:
            self.stdout.write(
                f"Switch {switch.pk} queued: follow it with switch_model {project.name}"
            )
            return
        with tqdm(total=switch.total, unit="memory", disable=None) as bar:
            ended: str = EmbeddingSwitch.Status.RUNNING
            while ended == EmbeddingSwitch.Status.RUNNING:  # memories being embedded meanwhile
                ended = embedding_switch_run(
                    switch_id=switch.pk, max_seconds=None, progress=bar.update
                )
                if ended == EmbeddingSwitch.Status.RUNNING:
                    time.sleep(1.0)
        now = choice_of(project_space_read(project.pk))
        self.stdout.write(f"Switch {switch.pk}: {ended}; {project.name} uses {now}.")
