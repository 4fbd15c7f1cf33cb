# One image for web, the two worker pools and beat (docker-compose.yml): the workers run
#   celery -A memoryhub worker --queues default --hostname embed@%h  (embedding)
#   celery -A memoryhub worker --queues derived,ingestion,maintenance --hostname derived@%h
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    MEMORYHUB_DATA_DIR=/app/var STATIC_ROOT=/app/staticfiles \
    MALLOC_ARENA_MAX=2
WORKDIR /app

# CPU torch first, from PyTorch's CPU index: a plain `torch` would pull the CUDA build.
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml ./
COPY memoryhub memoryhub
COPY memories memories
COPY ingestion ingestion
COPY synopsis synopsis
# the Python client: /mcp/ (memoryhub/mcp.py) serves its tools through it
COPY clients/python clients/python
RUN pip install --no-cache-dir . ./clients/python
COPY . .
RUN useradd --create-home memoryhub && mkdir -p var staticfiles && chown -R memoryhub /app
USER memoryhub
# collectstatic needs settings, and settings need a database URL (never connected to here)
RUN DATABASE_URL=postgres://build@localhost/build REDIS_URL=redis://localhost:6379/0 \
    SECRET_KEY=build python manage.py collectstatic --noinput

EXPOSE 8000
CMD ["gunicorn", "memoryhub.wsgi", "--bind", "0.0.0.0:8000", "--workers", "2", "--threads", "16", "--limit-request-line", "8190"]
