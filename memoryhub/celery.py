"""The Celery app: tasks are discovered in each app's tasks.py."""

import os

from celery import Celery
from celery.signals import beat_init, worker_init, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")

app = Celery("memoryhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _worker_init(**kwargs: object) -> None:
    from memories.services.embedding import embedding_model_check
    from memoryhub import embedded

    embedded.services_start()  # a no-op under the hub, which passes DATABASE_URL on
    embedding_model_check()


@beat_init.connect
def _beat_init(**kwargs: object) -> None:
    from django.conf import settings

    from memoryhub import embedded
    from memoryhub.beat_lock import beat_lock_hold

    embedded.services_start()
    beat_lock_hold(settings.REDIS_URL)  # one beat sends; another waits (memoryhub/beat_lock.py)


@worker_process_init.connect
def _worker_process_init(**kwargs: object) -> None:
    from memories.worker import worker_process_setup

    worker_process_setup()


def _add_worker_steps() -> None:
    from memories.worker import HeartbeatStep

    app.steps["worker"].add(HeartbeatStep)


_add_worker_steps()
