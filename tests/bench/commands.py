"""bench/evaluate.py run as a command, for the evaluation tests."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def command_line(*argv):
    """bench/evaluate.py run with ``argv`` in a new process (only what fails before
    Django starts: those runs never reach a database)."""
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / "evaluate.py"), *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=60,
    )
