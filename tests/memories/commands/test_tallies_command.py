"""manage.py tallies: a fold, a check that finds a tally gone wrong (and names it), a
rebuild that repairs it, a project that does not exist."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from memories.models import EndUser, MemoryTally
from tests.memories.services.test_tallies import write


def run(*args):
    stdout = io.StringIO()
    call_command("tallies", *args, stdout=stdout, stderr=io.StringIO())
    return stdout.getvalue()


def test_a_check_finds_a_wrong_tally_and_a_rebuild_repairs_it(owner, outsider):
    maria = EndUser.objects.create(project=owner.project, external_id="maria")
    write(owner.project, maria, [f"turn {n}" for n in range(4)])
    write(
        outsider.project, EndUser.objects.create(project=outsider.project, external_id="x"), ["a"]
    )
    assert "agree with their memories" in run("--check")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memories_memory_tally SET n = n + 3 WHERE project_id = %s", [owner.project.pk]
        )
    with pytest.raises(CommandError, match="1 difference"):
        run("--check")
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("tallies", "--check", stdout=out, stderr=io.StringIO())
    assert "owner: message/active/pending tallied 7, counted 4" in out.getvalue()
    assert "Rebuilt the tallies of 1 project(s)." in run("--rebuild", "--project", "owner")
    assert "The tallies of 2 project(s) agree" in run("--check")


def test_a_fold_leaves_one_row_a_group(owner):
    maria = EndUser.objects.create(project=owner.project, external_id="maria")
    for n in range(3):
        write(owner.project, maria, [f"turn {n}"])
    assert MemoryTally.objects.filter(project_id=owner.project.pk).count() == 3
    assert run() == "Folded: 1 tally rows.\n"


def test_an_unknown_project_is_refused(owner):
    with pytest.raises(CommandError, match="No project named"):
        run("--check", "--project", "nobody")
