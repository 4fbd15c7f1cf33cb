from django.apps import AppConfig


class SynopsisConfig(AppConfig):
    name = "synopsis"
