"""The hub's web server: threads enough that a write finds one free while searches wait
for their slots (WEB_THREADS, --web-threads); its children's malloc arenas."""

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


@pytest.mark.parametrize(("given", "arenas"), [({}, "2"), ({"MALLOC_ARENA_MAX": "8"}, "8")])
def test_children_get_two_malloc_arenas_unless_told_otherwise(tmp_path, given, arenas) -> None:
    command = Command()
    options = vars(command.create_parser("manage.py", "hub").parse_args([]))
    children = command.children({"PATH": "/bin", **given}, options, tmp_path)
    assert {child.name for child in children} == {"web", "worker-embed", "worker-derived", "beat"}
    for child in children:
        assert child.env["MALLOC_ARENA_MAX"] == arenas
        assert child.env["PATH"] == "/bin"
