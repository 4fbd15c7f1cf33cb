"""Every response carries Server-Timing: the hub's time, its database part, its CPU and
(Linux) its wait for a core."""

import re
import sys

from bench.client import server_timing

HEADER = re.compile(r"^app;dur=[0-9.]+, db;dur=[0-9.]+, cpu;dur=[0-9.]+(, queue;dur=[0-9.]+)?$")


def test_a_write_says_its_time_its_database_part_and_its_cpu(owner):
    response = owner.client.post(
        "/api/v1/memories/", {"user": "ana", "content": "likes green tea"}, format="json"
    )
    assert response.status_code == 201
    assert HEADER.match(response["Server-Timing"]), response["Server-Timing"]
    timing = server_timing(response["Server-Timing"])
    # it wrote to the database, within the time the whole request took
    assert 0 < timing["db"] <= timing["app"]
    assert timing["cpu"] > 0
    if sys.platform == "linux":  # the thread's wait for a core, from its schedstat
        assert 0 <= timing["queue"] <= timing["app"]


def test_a_refused_request_has_it_too(anonymous, db):
    response = anonymous.get("/api/v1/memories/")
    assert response.status_code in (401, 403)
    assert HEADER.match(response["Server-Timing"])


def test_the_bench_reads_the_header():
    assert server_timing("app;dur=12.5, db;dur=3.0, cpu;dur=4.25") == {
        "app": 12.5, "db": 3.0, "cpu": 4.25,
    }  # fmt: skip
    assert server_timing(None) == {}
