from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from memories.models import EmbeddingSpace
from memories.services.vector_index import hnsw_options, index_rebuild, index_state


class Command(BaseCommand):
    help = (
        "Show each embedding space's HNSW index and the options it was built with; with "
        "--rebuild, build the indexes whose options differ from RETRIEVAL_HNSW_M and "
        "RETRIEVAL_HNSW_EF_CONSTRUCTION anew (beside the old one: writes and searches go "
        "on), with a progress bar."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--rebuild", action="store_true", help="rebuild the indexes not built as configured"
        )
        parser.add_argument(
            "--force", action="store_true", help="with --rebuild: rebuild every index"
        )

    def handle(self, *args: Any, rebuild: bool, force: bool, **options: Any) -> None:
        wanted = _options_text(hnsw_options())
        self.stdout.write(f"Configured: {wanted}")
        for space in EmbeddingSpace.objects.order_by("pk"):
            state = index_state(name=space.index_name)
            if state is None:
                described = "no index (made when the worker starts)"
            else:
                described = (
                    f"{_options_text(state.options)}, {state.size_bytes / 2**20:,.1f} MiB"
                    f"{'' if state.valid else ', INVALID'}"
                )
            self.stdout.write(f"{space} {space.index_name}: {described}")
            if not rebuild or (state is not None and state.current and not force):
                continue
            with tqdm(total=1, unit="block", desc=f"  {space.index_name}", disable=None) as bar:
                state = index_rebuild(space=space, progress=_bar_update(bar))
            self.stdout.write(
                f"Rebuilt {space.index_name}: {_options_text(state.options)}, "
                f"{state.size_bytes / 2**20:,.1f} MiB"
            )


def _options_text(options: dict[str, int]) -> str:
    return ", ".join(f"{key} {value}" for key, value in options.items())


def _bar_update(bar: tqdm) -> Any:  # type: ignore[type-arg]
    def update(phase: str, done: int, total: int) -> None:
        if total and bar.total != total:
            bar.reset(total=total)
        bar.set_postfix_str(phase, refresh=False)
        bar.n = done if total else bar.n
        bar.refresh()

    return update
