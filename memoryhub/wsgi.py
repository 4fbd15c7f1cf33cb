import contextlib
import gc
import os

from django.core.wsgi import get_wsgi_application

from memories.providers.heap import heap_trim
from memoryhub import embedded

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
application = get_wsgi_application()
embedded.services_start()  # a no-op under the hub, which passes DATABASE_URL on


def _model_tune() -> None:
    from memories.providers.embeddings import web_process_tune

    web_process_tune()  # before the warm-up loads the model


_model_tune()


def _warm_up() -> None:
    """Load the embedding model in the background so the first search is not slow."""
    from memories.providers.embeddings import get_provider

    with contextlib.suppress(Exception):  # the first real search reports any error
        get_provider().embed(["warm-up"])
    # Django and torch leave many long-lived objects; a full collection walking them
    # inside a request stalled it (BENCHMARKS.md). Frozen objects are never scanned again.
    gc.freeze()
    heap_trim()  # what loading the model freed: -15 MiB


if os.environ.get("EMBEDDING_WARM_UP", "1") == "1":
    import threading

    threading.Thread(target=_warm_up, name="embedding-warm-up", daemon=True).start()
