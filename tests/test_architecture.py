"""The dependency rule (DESIGN.md): `ingestion` and `synopsis` import `memories`;
`memories` imports neither; the two do not import each other; no product code
imports `bench`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "memories": {"ingestion", "synopsis", "bench"},
    "ingestion": {"synopsis", "bench"},
    "synopsis": {"ingestion", "bench"},
    "memoryhub": {"bench"},
}


def imported_packages(path: Path) -> set[str]:
    """The top-level packages a module imports, wherever the import statement is."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def violations(package: str) -> list[str]:
    return [
        f"{path.relative_to(BASE_DIR)} imports {name}"
        for path in sorted((BASE_DIR / package).rglob("*.py"))
        for name in sorted(imported_packages(path) & FORBIDDEN[package])
    ]


def test_services_never_import_the_tasks():
    """Tasks call services; a service sends a task by its name (EMBEDDING_RUN_TASK)."""
    services = BASE_DIR / "memories" / "services"
    importers = []
    for path in sorted(services.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if "memories.tasks" in modules:
                importers.append(path.name)
    assert importers == []


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_follow_the_dependency_rule(package: str) -> None:
    assert violations(package) == []


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from synopsis.llm import x\n    import bench.run\n")
    assert imported_packages(module) >= {"synopsis", "bench"}
