"""The hub's web server: threads enough that a write finds one free while searches wait
for their slots (WEB_THREADS, --web-threads)."""

from pathlib import Path

import pytest

from memoryhub.management.commands.hub import Command


def web_threads(tmp_path: Path, *argv: str) -> str:
    command = Command()
    options = vars(command.create_parser("manage.py", "hub").parse_args(list(argv)))
    web = next(child for child in command.children({}, options, tmp_path) if child.name == "web")
    return web.command[web.command.index("--threads") + 1]


def test_the_web_server_has_16_threads_a_process_by_default(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("WEB_THREADS", raising=False)
    assert web_threads(tmp_path) == "16"


@pytest.mark.parametrize(
    ("env", "argv", "threads"), [("8", (), "8"), ("8", ("--web-threads", "32"), "32")]
)
def test_web_threads_and_the_option_set_them(tmp_path, monkeypatch, env, argv, threads) -> None:
    monkeypatch.setenv("WEB_THREADS", env)
    assert web_threads(tmp_path, *argv) == threads
