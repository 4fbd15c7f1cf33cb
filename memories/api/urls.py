from django.urls import path

from memories.api import (
    buffer,
    context,
    embedding,
    exports,
    memories,
    pruning,
    search,
    settings,
    synopsis,
    users,
    working,
)

app_name = "api"
urlpatterns = [
    path("users/", users.EndUserListView.as_view(), name="user-list"),
    path("users/<str:external_id>/", users.EndUserDetailView.as_view(), name="user-detail"),
    path("rooms/", users.RoomListView.as_view(), name="room-list"),
    path("rooms/<str:external_id>/", users.RoomDetailView.as_view(), name="room-detail"),
    path("rooms/<str:external_id>/buffer/", buffer.BufferView.as_view(), name="room-buffer"),
    path(
        "rooms/<str:external_id>/buffer/search/",
        buffer.BufferSearchView.as_view(),
        name="room-buffer-search",
    ),
    path(
        "rooms/<str:external_id>/working/",
        working.WorkingMemoryView.as_view(),
        name="room-working",
    ),
    path(
        "rooms/<str:external_id>/working/search/",
        working.WorkingSearchView.as_view(),
        name="room-working-search",
    ),
    path(
        "rooms/<str:external_id>/working/<str:item_id>/",
        working.WorkingItemView.as_view(),
        name="room-working-item",
    ),
    path(
        "users/<str:external_id>/export/", exports.EndUserExportView.as_view(), name="user-export"
    ),
    path("rooms/<str:external_id>/export/", exports.RoomExportView.as_view(), name="room-export"),
    path("import/", exports.ImportView.as_view(), name="import"),
    path("prune/", pruning.PruneView.as_view(), name="prune"),
    path("prune/runs/", pruning.PruneRunListView.as_view(), name="prune-runs"),
    path("prune/runs/<int:run_id>/", pruning.PruneRunDetailView.as_view(), name="prune-run"),
    path(
        "users/<str:external_id>/synopsis/",
        synopsis.EndUserSynopsisView.as_view(),
        name="user-synopsis",
    ),
    path(
        "users/<str:external_id>/synopsis/refresh/",
        synopsis.EndUserSynopsisRefreshView.as_view(),
        name="user-synopsis-refresh",
    ),
    path("memories/", memories.MemoryListView.as_view(), name="memory-list"),
    path("memories/batch/", memories.MemoryBatchView.as_view(), name="memory-batch"),
    path("memories/count/", memories.MemoryCountView.as_view(), name="memory-count"),
    path("memories/<str:memory_id>/", memories.MemoryDetailView.as_view(), name="memory-detail"),
    path(
        "memories/<str:memory_id>/revisions/",
        memories.MemoryRevisionListView.as_view(),
        name="memory-revisions",
    ),
    path("search/", search.SearchView.as_view(), name="search"),
    path("context/", context.ContextView.as_view(), name="context"),
    path("settings/", settings.SettingsView.as_view(), name="settings"),
    path("embedding/", embedding.EmbeddingView.as_view(), name="embedding"),
    path("embedding/switch/", embedding.EmbeddingSwitchView.as_view(), name="embedding-switch"),
    path(
        "embedding/switch/cancel/",
        embedding.EmbeddingSwitchCancelView.as_view(),
        name="embedding-switch-cancel",
    ),
    path(
        "settings/revisions/",
        settings.SettingsRevisionListView.as_view(),
        name="settings-revisions",
    ),
]
