from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from memories.services.embedding import embedding_pending_count, embedding_run


class Command(BaseCommand):
    help = "Embed every memory still waiting for a vector, here and now (with a progress bar)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=None)

    def handle(self, *args: Any, batch_size: int | None, **options: Any) -> None:
        with tqdm(total=embedding_pending_count(), unit="memory", disable=None) as bar:
            done = embedding_run(batch_size=batch_size, progress=bar.update)
        self.stdout.write(f"Embedded {done} memories.")
