from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memories.providers.model_files import LOCAL_MODELS, MINILM, ModelNotInstalled
from memories.providers.onnx_export import (
    STEPS,
    ExportError,
    manifest_read,
    onnx_export,
    onnx_folder,
)


class Command(BaseCommand):
    help = (
        "Export a local model (all-MiniLM-L6-v2 by default, or --model all-mpnet-base-v2; "
        "from their PyPI packages) as ONNX graphs, float32 and int8, into the data folder, "
        "for EMBEDDING_RUNTIME=onnx-fp32 or onnx-int8. Done at first use otherwise; a "
        "current export is kept unless --force."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", default=MINILM, choices=list(LOCAL_MODELS))
        parser.add_argument("--force", action="store_true", help="export again")

    def handle(self, *args: Any, model: str, force: bool, **options: Any) -> None:
        data_dir = settings.DATA_DIR
        folder = onnx_folder(data_dir, model=model)
        try:
            current = not force and manifest_read(folder, model, data_dir) is not None
        except (ModelNotInstalled, ValueError) as error:  # missing, or fails its checksums
            raise CommandError(str(error)) from error
        if current:
            self.stdout.write(f"The ONNX graphs in {folder} are current (--force exports again).")
            return
        with tqdm(total=len(STEPS), unit="step", disable=None) as bar:

            def progress(step: str) -> None:  # called as each step starts
                bar.update(STEPS.index(step) - bar.n)
                bar.set_description(step)

            try:
                manifest = onnx_export(
                    folder=folder, model=model, data_dir=data_dir, force=force, progress=progress
                )
            except ExportError as error:
                raise CommandError(str(error)) from error
            bar.update(bar.total - bar.n)
        parity = ", ".join(
            f"{name} {cosine}" for name, cosine in manifest["parity_min_cosine"].items()
        )
        self.stdout.write(
            f"Exported {model} to {folder} in {manifest['export_seconds']} s "
            f"(worst cosine to torch: {parity})."
        )
