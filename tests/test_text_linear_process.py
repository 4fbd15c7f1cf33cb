"""Runs tests/test_text_linear.py (the guard of issue 45) in a fresh Python process: it
compares CPU times, which the state of a long test process skews."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.test_text_linear import FRESH_PROCESS

GUARD = Path(__file__).with_name("test_text_linear.py")


def test_every_text_function_is_linear_measured_in_a_fresh_process() -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            str(GUARD),
        ],
        env={**os.environ, FRESH_PROCESS: "1"},
        cwd=GUARD.parent.parent,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout.splitlines()[-1]
