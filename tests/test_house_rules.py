"""Sizes and layout the house keeps (issue 38), checked on the product's source: every
module under 400 lines, every function under 50, and no ``# fmt: skip`` (ruff lays out
all code; a SQL statement is a string literal, which it leaves alone). These had come
back after the renovation with nothing to say so."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_architecture import product_files

MODULE_LINES = 400
FUNCTION_LINES = 50


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 >= FUNCTION_LINES
    ]


def test_every_module_is_under_400_lines() -> None:
    long = [
        f"{path} ({lines})"
        for path in product_files()
        if (lines := len(path.read_text().splitlines())) >= MODULE_LINES
    ]
    assert not long, "split these by topic: " + ", ".join(long)


def test_every_function_is_under_50_lines() -> None:
    long = [found for path in product_files() for found in long_functions(path)]
    assert not long, "name the steps of these: " + ", ".join(long)


def test_no_fmt_skip_in_the_product() -> None:
    skipped = [
        f"{path}:{number}"
        for path in product_files()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "fmt: skip" in line or "fmt: off" in line
    ]
    assert not skipped, "let ruff lay these out: " + ", ".join(skipped)


def test_the_function_check_sees_a_long_function(tmp_path: Path) -> None:
    source = tmp_path / "long.py"
    source.write_text("def f():\n" + "    x = 1\n" * FUNCTION_LINES)
    assert long_functions(source) == [f"long.py:1 f ({FUNCTION_LINES + 1} lines)"]
