from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "memories"
    verbose_name = "Memories"

    def ready(self) -> None:
        from memories import checks  # noqa: F401 - registers the system checks
        from memories.api import schema  # noqa: F401 - registers the OpenAPI auth extension

        self.kept_lookups_connect()

    def kept_lookups_connect(self) -> None:
        """What a web process keeps of keys, projects, users and rooms (LOOKUP_CACHE_SECONDS)
        is forgotten when this process changes one of them."""
        from django.db.models.signals import post_delete, post_save

        from memories.models import ApiKey, EndUser, Project, Room
        from memories.services.projects import api_keys_forget
        from memories.services.users import external_row_ids_forget

        for changed in (ApiKey, Project):
            for signal in (post_save, post_delete):
                signal.connect(api_keys_forget, sender=changed, dispatch_uid=f"kept-{changed}")
        for deleted in (EndUser, Room):
            post_delete.connect(
                external_row_ids_forget, sender=deleted, dispatch_uid=f"kept-{deleted}"
            )
