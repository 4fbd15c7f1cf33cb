"""The console phase's page list, rounds and table (bench/console_pages.py); the measuring
itself is the benchmark's, not a test's."""

from itertools import count

import pytest
from django.urls import resolve

from bench.console_pages import (
    Page,
    fixed,
    markdown_table,
    next_pages,
    pages_time,
    project_pages,
    user_pages,
)

BASE = "/dashboard/p/7/users/9/"
# the tabs an operator opens (templates/console/project_base.html, user_base.html)
PROJECT_TABS = {
    "console-overview", "console-users", "console-memories", "console-inbox",
    "console-documents", "console-jobs", "console-pruning", "console-trash",
    "console-activity", "console-usage", "console-keys", "console-team", "console-settings",
}  # fmt: skip
USER_TABS = {
    "console-user", "console-user-memories", "console-user-facts", "console-user-rooms",
    "console-user-context", "console-user-synopsis", "console-user-documents",
}  # fmt: skip


class FakeBrowser:
    """Answers each GET from ``pages`` (path -> html), 1 ms more each time; records them."""

    def __init__(self, pages: dict[str, str], status: int = 200) -> None:
        self.pages, self.status = pages, status
        self.clock = count(1)
        self.asked: list[tuple[str, dict[str, str]]] = []

    def request(self, method, path, body=None, headers=None):
        self.asked.append((path, headers or {}))
        return self.status, self.pages.get(path, ""), float(next(self.clock))


def questions():
    return (f"question {n}" for n in count())


def url_names(pages: list[Page]) -> set[str | None]:
    return {resolve(page.paths().split("?")[0]).url_name for page in pages}


def test_every_tab_of_the_project_and_the_user_is_timed() -> None:
    pages = [*user_pages(BASE, 3, questions()), *project_pages(7, "word")]
    names = url_names(pages)
    assert names >= PROJECT_TABS
    assert names >= USER_TABS
    assert {"console-user-room-view", "console-user-search", "dashboard"} <= names
    assert len({page.name for page in pages}) == len(pages)


def test_the_polled_fragments_and_filters_are_asked_as_htmx_would() -> None:
    pages = {page.name: page for page in project_pages(7, "painting")}
    assert pages["jobs, live poll"].paths() == "/dashboard/p/7/jobs/?part=live"
    assert pages["jobs, live poll"].htmx
    assert pages["overview, health poll"].htmx
    assert pages["memories, kind=fact"].paths() == "/dashboard/p/7/memories/?kind=fact"
    assert pages["memories, words"].paths() == "/dashboard/p/7/memories/?q=painting"


def test_searches_and_previews_ask_a_new_question_each_time() -> None:
    pages = {page.name: page for page in user_pages(BASE, 3, questions())}
    search = pages["user search, vector"]
    assert search.paths() != search.paths()
    assert "mode=vector" in search.paths()
    assert pages["user memories, last page"].paths() == f"{BASE}memories/?page=1000000"
    assert pages["user room view"].paths() == f"{BASE}rooms/3/view/"


def test_pages_time_measures_rounds_after_the_warmup_and_keeps_the_first() -> None:
    pages = [Page("a", fixed("/a/"), "A"), Page("b", fixed("/b/"), "B", htmx=True)]
    browser = FakeBrowser({"/a/": "<p>A</p>", "/b/": "<p>B</p>"})
    figures = pages_time(browser, pages, rounds=3, warmup=1)
    # rounds interleave the pages: a=1, b=2, a=3, b=4, ...
    assert [path for path, _ in browser.asked] == ["/a/", "/b/"] * 4
    assert figures["a"]["n"] == 3
    assert figures["a"]["first_ms"] == 1.0
    assert figures["a"]["max"] == 7.0
    assert browser.asked[1][1] == {"HX-Request": "true"}
    assert browser.asked[0][1] == {}


@pytest.mark.parametrize("status, html", [(200, "<p>an error page</p>"), (500, "A")])
def test_pages_time_refuses_a_wrong_answer(status, html) -> None:
    browser = FakeBrowser({"/a/": html}, status=status)
    with pytest.raises(RuntimeError, match="/a/"):
        pages_time(browser, [Page("a", fixed("/a/"), "A")], rounds=1, warmup=0)


def test_next_pages_follow_the_links_the_first_pages_give() -> None:
    table = '<a href="/dashboard/p/7/memories/?after=abc&amp;kind=fact" hx-get="x" rel="next">'
    activity = (
        '<a class="page" href="/dashboard/p/7/activity/?cursor=c1" hx-get="y">Older changes</a>'
    )
    browser = FakeBrowser(
        {"/dashboard/p/7/memories/?kind=fact": table, "/dashboard/p/7/activity/": activity}
    )
    found = {page.name: page.paths() for page in next_pages(browser, 7)}
    # the unfiltered table is one page here: no second page to time
    assert found == {
        "memories, kind=fact, page 2": "/dashboard/p/7/memories/?after=abc&kind=fact",
        "activity, page 2": "/dashboard/p/7/activity/?cursor=c1",
    }


def test_markdown_table_puts_each_level_in_its_columns() -> None:
    row = {"p50": 10.04, "p95": 20.0}
    levels = [
        {"label": "project of 20,000", "requests": {"overview": row, "users": row}},
        {"label": "project of 1,000,000", "requests": {"overview": {"p50": 150.0, "p95": 210.5}}},
    ]
    lines = markdown_table(levels).splitlines()
    assert (
        lines[0]
        == "| page | project of 20,000 p50 ms | p95 ms | project of 1,000,000 p50 ms | p95 ms |"
    )
    assert lines[2] == "| overview | 10.0 | 20.0 | 150.0 | 210.5 |"
    assert lines[3] == "| users | 10.0 | 20.0 | – | – |"
