"""The bounded parser's child process (ingestion.loaders.document_parse_bounded).

    python -m ingestion.parse_child --filename NAME --mime-type TYPE --memory-mb N --cpu-seconds S

Limits its own address space and CPU time, reads the file's bytes from stdin, and
writes one JSON object to stdout: {"document": ...} or {"error": "message"}. Running
out of memory exits with status 75; out of CPU time, the kernel's SIGXCPU ends it.
Imports nothing of Django.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys

# the parsers are imported before the limits are set: their import is our code, not the file's
from ingestion.loaders import LoaderError, document_parse


def limits_set(*, memory_mb: int, cpu_seconds: int) -> None:
    """Address space and CPU time limits for this process (and no core dumps)."""
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # soft limit: SIGXCPU; the hard one a second later: SIGKILL if SIGXCPU is caught
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ingestion.parse_child")
    parser.add_argument("--filename", default="")
    parser.add_argument("--mime-type", default="")
    parser.add_argument("--memory-mb", type=int, required=True)
    parser.add_argument("--cpu-seconds", type=int, required=True)
    options = parser.parse_args(argv)
    limits_set(memory_mb=options.memory_mb, cpu_seconds=options.cpu_seconds)
    try:
        data = sys.stdin.buffer.read()
        document = document_parse(
            data, filename=options.filename, mime_type=options.mime_type or None
        )
        reply = json.dumps({"document": document.to_json()})
    except LoaderError as error:
        reply = json.dumps({"error": str(error)})
    except MemoryError:
        return 75  # ingestion.loaders.parse.EXIT_OUT_OF_MEMORY
    sys.stdout.write(reply)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
