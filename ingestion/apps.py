from django.apps import AppConfig


class IngestionConfig(AppConfig):
    name = "ingestion"
