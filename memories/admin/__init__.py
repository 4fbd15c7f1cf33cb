"""The curators' admin: every model of the app registered, lists that stay fast on
large tables, actions through the same services as the API (memories/admin/*)."""

from memories.admin import embedding, memories, records, synopsis, tasks, tenancy

__all__ = ["embedding", "memories", "records", "synopsis", "tasks", "tenancy"]
