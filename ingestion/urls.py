"""The console's Documents tab (ingestion/views.py), under a project's console prefix;
included by memoryhub/urls.py (memories imports nothing from this app)."""

from django.urls import path

from ingestion import views

documents = "dashboard/p/<int:project_id>/documents/"
document = f"{documents}<uuid:document_id>/"

urlpatterns = [
    path(documents, views.documents, name="console-documents"),
    path(f"{documents}upload/", views.document_upload, name="console-document-upload"),
    path(document, views.document_detail, name="console-document"),
    path(f"{document}reingest/", views.document_reingest_view, name="console-document-reingest"),
    path(f"{document}delete/", views.document_delete_view, name="console-document-delete"),
]
