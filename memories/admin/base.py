"""What every curator's list shares: counts that stay cheap on tables of millions of
rows, read-only record admins, a text-input list filter and id search."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from functools import cached_property
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import Page, Paginator
from django.db import connections
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from memories.services.revisions import Actor

# rows a list counts exactly; past that the planner's estimate (a COUNT(*) reads every
# matching row, ~10 ms per 100,000 memories, on each page view)
EXACT_COUNT_LIMIT = 10_000


def actor_of(request: HttpRequest) -> Actor:
    """The operator making an admin change, as revisions record them."""
    return Actor.operator(request.user.get_username())  # type: ignore[union-attr]


def planner_estimate(queryset: QuerySet[Any]) -> int:
    """PostgreSQL's estimate of the rows ``queryset`` returns (EXPLAIN, nothing read)."""
    sql, params = queryset.order_by().values("pk").query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


class LargeTablePaginator(Paginator):
    """Pages of a list over a large table.

    The count is exact up to EXACT_COUNT_LIMIT rows (a bounded read) and past that the
    planner's estimate: page links are right for small results and approximate, but
    instant, for a whole table. A page is read in two queries: its ids in the list's
    order (narrow rows, no joins: sorting 100,000 memories without an index on the
    sort key takes a quarter of the time), then those rows with their relations.
    """

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return len(queryset)
        bounded = queryset.order_by()[: EXACT_COUNT_LIMIT + 1].count()
        if bounded <= EXACT_COUNT_LIMIT:
            return bounded
        return max(planner_estimate(queryset), bounded)

    def page(self, number: Any) -> Page:
        page = super().page(number)
        if isinstance(page.object_list, QuerySet) and isinstance(self.object_list, QuerySet):
            ids = list(page.object_list.values_list("pk", flat=True))
            rows = {row.pk: row for row in self.object_list.order_by().filter(pk__in=ids)}
            page.object_list = [rows[pk] for pk in ids if pk in rows]
        return page


class LargeTableAdmin(admin.ModelAdmin):
    """A list over a table that grows with use (memories, revisions, vectors): no full
    COUNT(*), no facet counts, 100 rows a page."""

    paginator = LargeTablePaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 100
    # model fields searched by exact id when the search term is a UUID
    uuid_search_fields: tuple[str, ...] = ()

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        """A UUID is looked up by id (indexed) instead of as text in every search field."""
        term = search_term.strip()
        if self.uuid_search_fields and (found := as_uuid(term)) is not None:
            return queryset.filter(
                Q.create([(name, found) for name in self.uuid_search_fields], connector=Q.OR)
            ), False
        return super().get_search_results(request, queryset, search_term)


def as_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


class ReadOnlyAdmin(admin.ModelAdmin):
    """A record of what happened (revisions, LLM calls): viewable, never added, changed
    or deleted by hand."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class InputFilter(admin.SimpleListFilter):
    """A list filter typed into a text box (a user's external id), for relations with
    too many rows to list as links."""

    template = "admin/memories/input_filter.html"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("", "")]  # one dummy choice: a filter without lookups is not shown

    def choices(self, changelist: ChangeList) -> Iterator[Any]:
        """One 'choice': the current value, the other parameters to keep as hidden
        fields and the link that clears this filter."""
        yield {
            "value": self.value() or "",
            "hidden": [
                (name, value)
                for name, values in changelist.filter_params.items()
                if name != self.parameter_name
                for value in values
            ],
            "clear": changelist.get_query_string(remove=[str(self.parameter_name)]),
        }


# objects a delete confirmation names one by one
DELETE_LISTED = 100


def deletion_summary(
    objs: Any, opts: Any, *, also: dict[str, int]
) -> tuple[list[str], dict[str, int], set[str], list[str]]:
    """What ModelAdmin.get_deleted_objects returns, short: the first DELETE_LISTED
    objects by name and a count of what goes with them (``also``), instead of Django's
    line for every related row (a user's 10,000 memories and each of their vectors)."""
    total = objs.count() if isinstance(objs, QuerySet) else len(objs)
    listed = [str(obj) for obj in objs[:DELETE_LISTED]]
    if total > DELETE_LISTED:
        listed.append(f"… and {total - DELETE_LISTED} more")
    listed += [f"{count} {name}" for name, count in also.items()]
    return listed, {str(opts.verbose_name_plural): total, **also}, set(), []


def change_link(obj: Model | None, text: Any = None) -> str:
    """A link to ``obj``'s admin page (its text escaped), or '-'."""
    if obj is None:
        return "-"
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, obj if text is None else text)


def pretty_json(value: Any) -> str:
    """JSON as an indented, escaped <pre> block."""
    return format_html(
        '<pre style="white-space: pre-wrap; margin: 0">{}</pre>',
        json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str),
    )


def changes_html(
    before: dict[str, Any] | None, after: dict[str, Any] | None, *, limit: int = 0
) -> str:
    """The fields a revision changed, each as 'name: before → after' (escaped), each
    value cut to ``limit`` characters if given; a creation or deletion shows the fields
    it set or removed."""
    old, new = before or {}, after or {}
    names = [
        name
        for name in sorted(old.keys() | new.keys())
        if old.get(name) != new.get(name) and (old.get(name) or new.get(name))
    ]
    return format_html_join(
        "",
        "<div><b>{}</b>: {} → {}</div>",
        ((name, _json(old.get(name), limit), _json(new.get(name), limit)) for name in names),
    )


def _json(value: Any, limit: int) -> str:
    text = "—" if value is None else json.dumps(value, ensure_ascii=False, default=str)
    return f"{text[: limit - 1]}…" if limit and len(text) > limit else text
