import json
import secrets
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memories.evaluation import CATEGORIES, locomo_evaluate, locomo_ingest, locomo_load
from memories.models import Project
from memories.services.embedding import embedding_pending_count, embedding_run
from memories.services.search import SearchMode

ORDER = ["all", "cat1-4", *CATEGORIES.values()]


class Command(BaseCommand):
    help = (
        "Retrieval quality on a LoCoMo-format file: load each conversation as a user, embed, "
        "search every question, print recall@k / hit@k per category and search latency."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="e.g. ../shared/data/locomo-dev.json")
        parser.add_argument(
            "--modes", default=",".join(SearchMode.ALL), help="comma-separated search modes"
        )
        parser.add_argument("--project", help="evaluate an already loaded project (else a new one)")
        parser.add_argument("--keep", action="store_true", help="keep the loaded project")
        parser.add_argument("--json", type=Path, help="also write the report as JSON here")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["path"].exists():
            raise CommandError(f"{options['path']} does not exist")
        conversations = locomo_load(options["path"])
        modes = [mode.strip() for mode in options["modes"].split(",") if mode.strip()]
        unknown = set(modes) - set(SearchMode.ALL)
        if unknown:
            raise CommandError(f"unknown modes {sorted(unknown)}; choose from {SearchMode.ALL}")
        if options["project"]:
            project = Project.objects.filter(name=options["project"]).first()
            if project is None:
                raise CommandError(f"no project {options['project']!r}")
        else:
            project = Project.objects.create(name=f"locomo-eval-{secrets.token_hex(4)}")
            turns = sum(len(c.turns) for c in conversations)
            with tqdm(total=turns, desc="write", unit="turn", disable=None) as bar:
                locomo_ingest(project=project, conversations=conversations, progress=bar.update)
            with tqdm(
                total=embedding_pending_count(), desc="embed", unit="turn", disable=None
            ) as bar:
                embedding_run(progress=bar.update)
        try:
            reports = []
            questions = sum(len(c.questions) for c in conversations)
            for mode in modes:
                with tqdm(total=questions, desc=mode, unit="q", disable=None) as bar:
                    reports.append(
                        locomo_evaluate(
                            project=project,
                            conversations=conversations,
                            mode=mode,
                            progress=bar.update,
                        )
                    )
            self.print_table(reports)
            if options["json"]:
                options["json"].write_text(json.dumps(reports, indent=2))
        finally:
            if not options["keep"] and not options["project"]:
                project.delete()

    def print_table(self, reports: list[dict[str, Any]]) -> None:
        header = f"{'mode':<10} {'questions':<22} {'n':>4}  " + "  ".join(
            f"{name:>9}" for name in ["recall@5", "recall@10", "recall@20", "hit@10"]
        )
        self.stdout.write(header)
        for report in reports:
            for bucket in ORDER:
                row = report["categories"].get(bucket)
                if row is None:
                    continue
                self.stdout.write(
                    f"{report['mode']:<10} {bucket:<22} {row['questions']:>4}  "
                    + "  ".join(
                        f"{row[name]:>9.1f}"
                        for name in ["recall@5", "recall@10", "recall@20", "hit@10"]
                    )
                )
            latency = report["latency_ms"]
            self.stdout.write(
                f"{report['mode']:<10} search latency "
                f"p50 {latency['p50']} ms, p95 {latency['p95']} ms"
            )
