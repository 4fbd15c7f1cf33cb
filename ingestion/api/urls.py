from django.urls import path

from ingestion.api import views

app_name = "ingestion_api"
urlpatterns = [
    path("documents/", views.DocumentListView.as_view(), name="document-list"),
    path(
        "documents/<str:document_id>/", views.DocumentDetailView.as_view(), name="document-detail"
    ),
    path(
        "documents/<str:document_id>/reingest/",
        views.DocumentReingestView.as_view(),
        name="document-reingest",
    ),
    path(
        "documents/<str:document_id>/chunks/",
        views.DocumentChunkListView.as_view(),
        name="document-chunks",
    ),
]
