"""The README's walk (examples/api_walk.py) runs to its end against a real hub: the
live server, a real Celery worker (embedding, summaries, facts) and the demo's key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_api_walk_passes(live_server: Any, owner: Any, celery_worker_process: Any) -> None:
    walk = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "api_walk.py"),
            "--url",
            live_server.url,
            "--key",
            owner.raw_key,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert walk.returncode == 0, walk.stdout + walk.stderr
    assert "API walk completed." in walk.stdout
