"""What the evaluation commands (bench/evaluate.py, bench/context_eval.py,
bench/long_memories.py) share to run: Django on the hub's database, migrated, the data
folder's Redis, and a main that reports a reason it cannot run."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.rankings import EvaluationError


def django_start() -> None:
    """Django on the hub's database, migrated (a fresh data folder works too)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from memoryhub import embedded

    embedded.services_start()
    call_command("migrate", interactive=False, verbosity=0)


@contextmanager
def redis_started() -> Iterator[None]:
    """The data folder's Redis too: the writes queue their tasks (embedding, fact
    extraction) there instead of failing to connect, and the context caches and counts
    in it; stopped afterwards if started here."""
    from memoryhub import embedded

    server = embedded.services_start(redis=True)
    try:
        yield
    finally:
        if server is not None:
            server.stop()


def evaluation_main(
    argv: list[str] | None,
    parse: Callable[[list[str] | None], argparse.Namespace],
    run: Callable[[argparse.Namespace], Any],
) -> int:
    """An evaluation command's main: its arguments, Django and Redis, its run; 2 with
    the reason on stderr when it cannot run."""
    args = parse(argv)
    django_start()
    with redis_started():
        try:
            run(args)
        except EvaluationError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    return 0
