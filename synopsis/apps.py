from django.apps import AppConfig


class SynopsisConfig(AppConfig):
    name = "synopsis"

    def ready(self) -> None:
        from synopsis import receivers  # noqa: F401  (connects to memories.signals)
