"""Importing the settings starts no server and writes no file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

BASE_DIR = Path(settings.BASE_DIR)
SETUP_AND_REPORT = """
import django, psutil
django.setup()
from django.conf import settings
print(len(psutil.Process().children(recursive=True)), settings.DATABASES["default"]["HOST"])
"""


def _files(folder: Path) -> set[tuple[str, float]]:
    """The source tree's files (not the data folders, caches or the virtualenv)."""
    skip = {".venv", "var", ".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
    found = set()
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in names:
            path = Path(root) / name
            found.add((str(path), path.stat().st_mtime))
    return found


def test_django_setup_starts_nothing_and_writes_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "never-made"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "PYTEST_VERSION"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="memoryhub.settings",
        MEMORYHUB_DATA_DIR=str(data_dir),
        PYTHONDONTWRITEBYTECODE="1",
    )
    before = _files(BASE_DIR)
    result = subprocess.run(
        [sys.executable, "-c", SETUP_AND_REPORT],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    children, host = result.stdout.split(maxsplit=1)
    assert children == "0"  # no PostgreSQL, no Redis
    assert "not started" in host  # a query made now would say why it fails
    assert not data_dir.exists()  # no data folder, secret key or static folder
    assert _files(BASE_DIR) == before
