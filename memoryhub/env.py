"""Reading the environment for memoryhub/settings.py: typed values of environment
variables, and a .env file's lines for the variables the environment leaves unset."""

from __future__ import annotations

import os
from pathlib import Path


def env_bool(name: str, default: bool = False) -> bool:
    """1, true, yes or on (any case) is true; anything else set is false."""
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def env_list(name: str, default: str) -> list[str]:
    """A comma-separated list, blank items left out."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def dotenv_load(path: Path) -> None:
    """KEY=VALUE lines of a .env file, for variables the environment does not set."""
    if not path.exists():
        return
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            os.environ.setdefault(key.strip(), value.strip().strip("\"'"))
