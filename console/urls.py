"""The operators' console's URLs: /dashboard/ lists projects; a project's pages live under
/dashboard/p/<id>/."""

from django.urls import path

from console import views
from console.paths import PROJECT, USER
from console.views import (
    activity,
    auth,
    documents,
    embedding,
    exports,
    facts,
    inbox,
    jobs,
    memory_edit,
    memory_table,
    projects,
    pruning,
    rooms,
    team,
    trash,
    usage,
    user_page,
    user_panels,
    users,
)

# the console: /dashboard/ lists projects; a project's pages live under /dashboard/p/<id>/
project = PROJECT
# the user page (views/user_page.py) and its changes (views/memory_edit.py)
user = USER
memory = f"{user}memories/<uuid:memory_id>/"
# the Documents tab (views/documents.py)
docs = f"{project}documents/"
document = f"{docs}<uuid:document_id>/"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth.login, name="login"),
    path("logout/", auth.logout, name="logout"),
    path("dashboard/", projects.dashboard, name="dashboard"),
    path(project, projects.overview, name="console-overview"),
    path(f"{project}keys/", projects.api_keys, name="console-keys"),
    path(f"{project}keys/new/", projects.api_key_new, name="console-key-new"),
    path(
        f"{project}keys/<int:key_id>/revoke/",
        projects.api_key_revoke_confirm,
        name="console-key-revoke",
    ),
    path(f"{project}settings/", projects.project_settings, name="console-settings"),
    path(f"{project}embedding/", embedding.project_embedding, name="console-embedding"),
    path(
        f"{project}embedding/switch/",
        embedding.project_embedding_switch,
        name="console-embedding-switch",
    ),
    path(
        f"{project}settings/<str:section>/",
        projects.project_settings_section,
        name="console-settings-section",
    ),
    path(f"{project}users/", users.users, name="console-users"),
    path(user, user_page.user_page, name="console-user"),
    path(f"{user}search/", user_page.user_search, name="console-user-search"),
    path(f"{user}rooms/<int:room_id>/", user_page.user_room, name="console-user-room"),
    path(f"{user}forget/", memory_edit.user_forget, name="console-user-forget"),
    # the user page's panels (views/user_panels.py)
    path(f"{user}synopsis/", user_panels.user_synopsis, name="console-user-synopsis"),
    path(
        f"{user}synopsis/refresh/",
        user_panels.user_synopsis_refresh,
        name="console-user-synopsis-refresh",
    ),
    path(
        f"{user}synopsis/<str:part>/edit/",
        user_panels.user_synopsis_edit,
        name="console-user-synopsis-edit",
    ),
    path(
        f"{user}synopsis/<str:part>/lock/",
        user_panels.user_synopsis_lock,
        name="console-user-synopsis-lock",
    ),
    path(f"{user}context/", user_panels.user_context_preview, name="console-user-context"),
    path(memory, memory_edit.memory_row, name="console-memory-row"),
    path(f"{memory}embedding/", memory_edit.memory_embedding, name="console-memory-embedding"),
    path(f"{memory}edit/", memory_edit.memory_edit, name="console-memory-edit"),
    path(f"{memory}pin/", memory_edit.memory_pin, name="console-memory-pin"),
    path(f"{memory}forget/", memory_edit.memory_forget, name="console-memory-forget"),
    path(f"{memory}undo/", memory_edit.memory_undo, name="console-memory-undo"),
    path(f"{memory}history/", memory_edit.memory_history, name="console-memory-history"),
    path(f"{memory}restore/", memory_edit.memory_restore_view, name="console-memory-restore"),
    path(docs, documents.documents, name="console-documents"),
    path(f"{docs}upload/", documents.document_upload, name="console-document-upload"),
    path(document, documents.document_detail, name="console-document"),
    path(
        f"{document}reingest/", documents.document_reingest_view, name="console-document-reingest"
    ),
    path(f"{document}delete/", documents.document_delete_view, name="console-document-delete"),
]

# the pages whose modules keep their own URLs (each module's ``urlpatterns``, written
# with console.paths' prefixes)
for module in (
    user_page,
    exports,
    jobs,
    usage,
    memory_table,
    pruning,
    activity,
    team,
    facts,
    rooms,
    inbox,
    trash,
):
    urlpatterns += module.urlpatterns
