"""What a web process keeps of a filtered set between searches: values that cost a
statement to read and hardly move (a large set's estimated size, its BM25 mean length),
each for a while, at most so many sets (all forgotten when full: an agent searches the
same user turn after turn, and a process that serves more sets than that reads them
again). Kept itself is memories.providers.kept's."""

from __future__ import annotations

from memories.models import Project
from memories.services.search.filters import SearchFilters


def set_key(project: Project, filters: SearchFilters) -> str:
    """A filtered set's key: its WHERE clause and parameters."""
    where, params = filters.sql(project)
    return repr((where, sorted(params.items())))
