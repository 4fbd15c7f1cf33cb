"""The layout's rules (DESIGN.md, "Layout"), checked on the source:

1. The dependency rule: `ingestion`, `synopsis` and `console` import `memories`;
   `memories` imports none of them; `ingestion` and `synopsis` do not import each other;
   nothing imports `console` but the project package's wiring (urls); no product code
   imports `bench`.
2. No upward arrows: no app imports the project package (`memoryhub`: settings are read
   through django.conf); inside `memories`, the providers import nothing of the core but
   other providers, the models no service, API or admin, the services no API, admin or
   task.
3. No import loops between the product's modules.
4. No first-party import inside a function, but in the app wiring that runs before or
   around Django's setup (apps.py, celery.py, wsgi.py, asgi.py, management commands).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent
APPS = ("memoryhub", "memories", "ingestion", "synopsis", "console")
FIRST_PARTY = {*APPS, "bench"}
FORBIDDEN = {
    "memories": {"ingestion", "synopsis", "console", "memoryhub", "bench"},
    "ingestion": {"synopsis", "console", "memoryhub", "bench"},
    "synopsis": {"ingestion", "console", "memoryhub", "bench"},
    "console": {"memoryhub", "bench"},
    "memoryhub": {"bench"},
}
# modules of `memories` -> the modules of `memories` they may not import
LAYERS = {
    "memories.providers": (
        "memories.models",
        "memories.services",
        "memories.api",
        "memories.admin",
        "memories.tasks",
        "memories.config",
    ),
    "memories.models": ("memories.services", "memories.api", "memories.admin", "memories.tasks"),
    "memories.services": ("memories.api", "memories.admin", "memories.tasks"),
}
WIRING = {"apps.py", "celery.py", "wsgi.py", "asgi.py", "urls.py"}  # urls: a view imported lazily


def product_files() -> list[Path]:
    return sorted(
        path
        for app in APPS
        for path in (BASE_DIR / app).rglob("*.py")
        if "migrations" not in path.parts
    )


def module_name(path: Path) -> str:
    inside = path.is_relative_to(BASE_DIR)
    parts = list((path.relative_to(BASE_DIR) if inside else Path(path.name)).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_wiring(path: Path) -> bool:
    return path.name in WIRING or ("management" in path.parts and "commands" in path.parts)


def imports_of(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The modules an import statement names, relative ones made absolute; for
    ``from a import b`` both ``a`` and ``a.b`` (b may be a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


@cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def module_imports(path: Path) -> list[str]:
    """What the module imports when it is imported (module level, TYPE_CHECKING blocks
    left out)."""
    module, is_package = module_name(path), path.name == "__init__.py"
    found: list[str] = []
    pending: list[ast.AST] = list(parsed(path).body)
    while pending:
        node = pending.pop()
        if _type_checking(node) or isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        ):
            continue
        found += imports_of(node, module, is_package)
        pending += list(ast.iter_child_nodes(node))
    return found


def all_imports(path: Path) -> list[str]:
    """Every module the file imports, wherever the import statement is."""
    module, is_package = module_name(path), path.name == "__init__.py"
    return [
        name for node in ast.walk(parsed(path)) for name in imports_of(node, module, is_package)
    ]


def inner_imports(path: Path) -> list[str]:
    """First-party imports inside functions (line: module)."""
    module, is_package = module_name(path), path.name == "__init__.py"
    found = []
    for function in ast.walk(parsed(path)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            names = imports_of(node, module, is_package)
            if names and names[0].split(".")[0] in FIRST_PARTY:
                found.append(f"{path.relative_to(BASE_DIR)}:{node.lineno} {names[0]}")  # noqa: E501
    return found


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(path): path for path in product_files()}
    return {
        module: {name for name in module_imports(path) if name in modules and name != module}
        for module, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_follow_the_dependency_rule(package: str) -> None:
    violations = [
        f"{path.relative_to(BASE_DIR)} imports {name}"
        for path in product_files()
        if path.relative_to(BASE_DIR).parts[0] == package
        for name in sorted({name.split(".")[0] for name in all_imports(path)})
        if name in FORBIDDEN[package]
    ]
    assert violations == []


def test_only_the_project_urls_import_the_console() -> None:
    importers = [
        str(path.relative_to(BASE_DIR))
        for path in product_files()
        if path.relative_to(BASE_DIR).parts[0] != "console"
        and any(name.split(".")[0] == "console" for name in all_imports(path))
    ]
    assert importers == ["memoryhub/urls.py"]


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_the_core_has_no_upward_arrows(layer: str) -> None:
    violations = [
        f"{module_name(path)} imports {name}"
        for path in product_files()
        if module_name(path) == layer or module_name(path).startswith(f"{layer}.")
        for name in sorted(set(all_imports(path)))
        if any(name == below or name.startswith(f"{below}.") for below in LAYERS[layer])
    ]
    assert violations == []


def test_there_are_no_import_loops() -> None:
    assert cycles(import_graph()) == []


def test_no_first_party_import_inside_a_function_outside_the_wiring() -> None:
    assert [
        line for path in product_files() if not is_wiring(path) for line in inner_imports(path)
    ] == []


# the checks themselves


def test_the_checks_see_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from synopsis.llm import x\n    import bench.run\n")
    parsed.cache_clear()
    assert {name.split(".")[0] for name in all_imports(module)} >= {"synopsis", "bench"}
    assert module_imports(module) == []


def test_the_loop_check_finds_a_loop() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_relative_imports_are_resolved() -> None:
    node = ast.parse("from .document import Span").body[0]
    assert imports_of(node, "ingestion.loaders.parse", False)[0] == "ingestion.loaders.document"
    assert imports_of(node, "ingestion.loaders", True)[0] == "ingestion.loaders.document"
