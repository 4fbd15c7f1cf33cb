"""The example agent loop (examples/agent_loop.py) runs to its end against a real hub
(the live server, a real Celery worker) and the tests' local LLM stub: a new
conversation's first model call is shown what the user said in an earlier one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_agent_loop_remembers_across_conversations(
    live_server: Any, owner: Any, celery_worker_process: Any
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "MEMORYHUB_API"))}
    loop = subprocess.run(
        [sys.executable, str(EXAMPLES / "agent_loop.py"), "--url", live_server.url],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "MEMORYHUB_API_KEY": owner.raw_key},
    )
    assert loop.returncode == 0, loop.stdout + loop.stderr
    assert loop.stdout.count("model: (the stub model) Noted.") == 4
    assert "Agent loop completed" in loop.stdout
