"""A task that sleeps through its soft time limit, as code that cannot be interrupted
would (it swallows Celery's SoftTimeLimitExceeded and sleeps on): the stuck task of
test_console_jobs_browser.py, run by a real worker started with ``-I`` this module."""

from __future__ import annotations

import time

from celery.exceptions import SoftTimeLimitExceeded

from memoryhub.celery import app

SLEEPER = "tests.console.browser.sleeper.sleeper"
SOFT_LIMIT = 2  # seconds


@app.task(name=SLEEPER, soft_time_limit=SOFT_LIMIT, time_limit=120)
def sleeper(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            time.sleep(0.2)
        except SoftTimeLimitExceeded:
            continue
