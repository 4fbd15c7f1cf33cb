"""The TypeScript client (clients/typescript/): its own tests, run with Node's test runner
against a live hub (pytest-django's live server on the test database, the owner's keys,
a real Celery worker for embeddings, facts and documents); its generated types and its
committed build checked against what the current schema and sources make; and what a
round trip through it adds over a raw fetch.

Node 20+ must be on PATH (these tests are skipped, saying so, without it). The checks of
the generated types and the build need the pinned devDependencies: `npm ci` runs in
clients/typescript when they are missing."""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from tests.conftest import Tenant

CLIENT = Path(settings.BASE_DIR) / "clients" / "typescript"
FOUND = {"node": shutil.which("node"), "npm": shutil.which("npm")}
NODE, NPM = FOUND["node"] or "node", FOUND["npm"] or "npm"
REGENERATE = (
    ".venv/bin/python manage.py spectacular --file clients/typescript/openapi.yaml"
    " && cd clients/typescript && npm run generate && npm run build"
)

pytestmark = pytest.mark.skipif(
    None in FOUND.values(), reason="the TypeScript client's tests need node and npm on PATH"
)


def run(command: list[str], *, timeout: float, env: dict[str, str] | None = None) -> str:
    """Run ``command`` in clients/typescript; its output, or the test fails showing it."""
    result = subprocess.run(
        command, cwd=CLIENT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result.stdout


def differences(expected: str, actual: str, name: str) -> str:
    """The first lines of a unified diff, for a failure message."""
    diff = difflib.unified_diff(
        expected.splitlines(), actual.splitlines(), f"committed {name}", "made now", lineterm=""
    )
    return "\n".join(list(diff)[:60])


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """The devDependencies at the versions package-lock.json pins (npm ci when they differ)."""
    listed = subprocess.run([NPM, "ls", "--depth=0"], cwd=CLIENT, capture_output=True, timeout=120)
    if listed.returncode != 0:
        run([NPM, "ci", "--no-audit", "--no-fund"], timeout=600)
    return CLIENT / "node_modules"


@pytest.fixture
def hub_env(live_server: object, owner: Tenant) -> dict[str, str]:
    """The environment the Node tests read: the live hub and the owner's two keys."""
    url = str(live_server.url).replace("//localhost:", "//127.0.0.1:")  # type: ignore[attr-defined]
    return {
        **os.environ,
        "MEMORYHUB_URL": url,
        "MEMORYHUB_API_KEY": owner.raw_key,
        "MEMORYHUB_READ_KEY": owner.raw_read_key,
    }


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_client_passes_its_node_tests_against_a_live_hub(
    hub_env: dict[str, str], celery_worker_process: object
) -> None:
    files = sorted(str(path.relative_to(CLIENT)) for path in (CLIENT / "test").glob("*.test.mjs"))
    output = run([NODE, "--test", "--test-reporter=spec", *files], env=hub_env, timeout=900)
    print(output)
    passed = re.search(r"^ℹ pass (\d+)$", output, re.MULTILINE)
    failed = re.search(r"^ℹ fail (\d+)$", output, re.MULTILINE)
    assert passed and failed, output
    assert int(failed[1]) == 0 and int(passed[1]) >= 25, output


def test_the_generated_types_are_what_the_current_schema_makes(
    node_modules: Path, tmp_path: Path
) -> None:
    schema, generated = tmp_path / "openapi.yaml", tmp_path / "openapi.d.ts"
    call_command("spectacular", "--file", str(schema))
    run([NODE, "scripts/generate.mjs", str(schema), str(generated)], timeout=120)
    committed = (CLIENT / "generated" / "openapi.d.ts").read_text()
    made = generated.read_text()
    if made != committed:
        pytest.fail(
            "the API's schema changed and the client's types did not follow; run\n"
            f"  {REGENERATE}\n{differences(committed, made, 'generated/openapi.d.ts')}"
        )


def test_the_committed_build_is_what_the_sources_make(node_modules: Path, tmp_path: Path) -> None:
    tsc, built = str(node_modules / ".bin" / "tsc"), tmp_path / "dist"
    run([tsc, "-p", "tsconfig.json", "--outDir", str(built)], timeout=300)
    committed = {path.relative_to(CLIENT / "dist"): path for path in (CLIENT / "dist").rglob("*")}
    made = {path.relative_to(built): path for path in built.rglob("*")}
    assert sorted(map(str, made)) == sorted(map(str, committed)), f"run: {REGENERATE}"
    for name, path in made.items():
        if path.is_file() and path.read_text() != committed[name].read_text():
            pytest.fail(
                f"dist/{name} is not what src/ builds; run: cd clients/typescript; npm run build\n"
                + differences(committed[name].read_text(), path.read_text(), f"dist/{name}")
            )
    # the tests and the benchmark use the built types as a user's program would
    run([tsc, "-p", "tsconfig.test.json"], timeout=300)
    run([str(node_modules / ".bin" / "prettier"), "--check", "."], timeout=120)


@pytest.mark.django_db(transaction=True)
def test_a_round_trip_through_the_client_adds_little_over_fetch(hub_env: dict[str, str]) -> None:
    output = run([NODE, "bench/overhead.mjs", "--calls", "200", "--json"], env=hub_env, timeout=600)
    figures = json.loads(output)
    print(json.dumps(figures, indent=1))
    assert [endpoint["name"].split()[0] for endpoint in figures] == ["hub", "hub", "local", "local"]
    # against the live server a call's time varies by tens of ms, which hides the client's
    # part (the figures are printed); against the local server it is all there is to see
    for endpoint in figures[2:]:
        assert endpoint["added_pair_median_ms"] < 1.0, endpoint
