"""The worker's CPU priority under autogroup scheduling: its session's group is given
the worker's nice value only when the worker leads a session of its own."""

import subprocess
import sys
import textwrap

from memories.worker import autogroup_nice

# a session leader (as the hub starts the Celery worker) forks a child (its pool
# process), which asks for the nice value; the file stands in for /proc/self/autogroup
POOL_CHILD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from memories.worker import autogroup_nice

    target = Path(sys.argv[1])
    pid = os.fork()
    if pid == 0:
        os._exit(0 if autogroup_nice(5, target) else 3)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
    """
)


def test_a_pool_process_of_a_session_leader_sets_its_groups_nice(tmp_path):
    target = tmp_path / "autogroup"
    target.write_text("/autogroup-1 nice 0\n")
    done = subprocess.run(
        [sys.executable, "-c", POOL_CHILD, str(target)], start_new_session=True, timeout=60
    )
    assert done.returncode == 0
    assert target.read_text() == "5"


def test_a_worker_inside_someone_elses_session_leaves_the_group_alone(tmp_path):
    # pytest's own process: its parent does not lead its session, as a worker started
    # from a shell's command line
    target = tmp_path / "autogroup"
    target.write_text("/autogroup-1 nice 0\n")
    assert autogroup_nice(5, target) is False
    assert target.read_text() == "/autogroup-1 nice 0\n"


def test_no_nice_value_and_no_autogroup_change_nothing(tmp_path):
    assert autogroup_nice(0, tmp_path / "autogroup") is False
    assert not (tmp_path / "autogroup").exists()
    # a kernel without autogroups has no such file (and a folder cannot be written)
    assert autogroup_nice(5, tmp_path) is False
