from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from memories.services.embedding_rewindow import embedded_count, embedding_rewindow


class Command(BaseCommand):
    help = (
        "Re-embed the memories whose stored vectors do not cover their whole text (long "
        "memories embedded before texts were windowed, or after EMBEDDING_WINDOW_* "
        "changed), with a progress bar. Search keeps serving meanwhile."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=64)

    def handle(self, *args: Any, batch_size: int, **options: Any) -> None:
        with tqdm(total=embedded_count(), unit="memory", disable=None) as bar:
            redone = embedding_rewindow(batch_size=batch_size, progress=bar.update)
        self.stdout.write(f"Re-embedded {redone} memories.")
