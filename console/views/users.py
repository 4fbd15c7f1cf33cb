"""The console's users list: search, sort, paginate (one view, page and fragment)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from console.forms import UserSearchForm
from console.services.overview import UsersPage, users_list
from console.views.access import ConsoleRequest, project_view

SORT_LABELS = {
    "-activity": "Last activity, newest first",
    "activity": "Last activity, oldest first",
    "-memories": "Most memories first",
    "memories": "Fewest memories first",
    "external_id": "User id, A to Z",
    "-external_id": "User id, Z to A",
}


@dataclass
class Column:
    label: str
    numeric: bool = False
    query: str = ""  # the link's query string; "" for a column that does not sort
    arrow: str = ""  # ▲ / ▼ on the column the list is sorted by


def _query(listing: UsersPage, **params: object) -> str:
    base = {"q": listing.query} if listing.query else {}
    return urlencode({**base, **params})


def _columns(listing: UsersPage) -> list[Column]:
    """The table's headers; a sortable one links to its sort (flipped when current)."""
    columns = []
    for label, key, numeric, first in (
        ("User", "external_id", False, "external_id"),
        ("Name", "", False, ""),
        ("Memories", "memories", True, "-memories"),
        ("Rooms", "", True, ""),
        ("Last activity", "activity", False, "-activity"),
    ):
        column = Column(label, numeric)
        if key:
            current = listing.sort.lstrip("-") == key
            descending = listing.sort.startswith("-")
            flipped = key if descending else f"-{key}"
            column.query = _query(listing, sort=flipped if current else first)
            column.arrow = ("▼" if descending else "▲") if current else ""
        columns.append(column)
    return columns


@project_view()
def users(request: ConsoleRequest) -> HttpResponse:
    """The project's users with memory and room counts and last activity; with HTMX
    (search as you type, sort, page) only the results are rendered."""
    form = UserSearchForm(request.GET)
    listing = users_list(project=request.project, **form.params())
    template = "console/end_users.html"
    if request.htmx and request.htmx.target == "user-results":
        template += "#results"
    context = {
        "listing": listing,
        "columns": _columns(listing),
        "page_query": _query(listing, sort=listing.sort),
        "sorts": SORT_LABELS.items(),
        "a_minute_ago": timezone.now() - timedelta(minutes=1),  # "just now", not "0 minutes"
        "section": "users",
    }
    return render(request, template, context)
