"""Which embedding model a project uses: the models it can choose, the space it serves
from, and the provider that embeds into a space.

A project serves from ``Project.embedding_space``, or from the configured model's space
(settings.EMBEDDING) when it has never switched. A switch (embedding_switch.py) embeds
every memory into its target space while the project keeps serving from the old one;
meanwhile new writes are embedded into both (``memory_spaces``), and one transaction
flips the project.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from memories.models import EmbeddingSpace, EmbeddingSwitch, Project
from memories.providers.embeddings import (
    EmbeddingDimensionMismatch,
    EmbeddingProvider,
    get_provider,
    provider_get,
)
from memories.providers.kept import Kept
from memories.services.vector_index import index_create_sql, index_state

# how long a process keeps the configured model's space (an ORM get_or_create: ~0.9
# ms of each context); a space, once made, never changes (another model is another
# space), so spaces by id are kept as long as the process lives
DEFAULT_SPACE_SECONDS = 60.0
_default_space: Kept[EmbeddingSpace] = Kept(DEFAULT_SPACE_SECONDS)
_spaces_by_id: dict[int, EmbeddingSpace] = {}
# seconds beyond LOOKUP_CACHE_SECONDS during which a switched project's writes still go
# into the space it left (memory_spaces)
LINGER_MARGIN = 30.0


def embedding_space_get(
    *, provider: EmbeddingProvider | None = None, index: bool = True
) -> EmbeddingSpace:
    """The space of ``provider``'s model (default: the configured one), created with
    its HNSW index on first use.

    Refuses (EmbeddingDimensionMismatch) a configuration whose dimension differs from
    the one the space was created with: its stored vectors would be unusable.
    """
    provider = provider or get_provider()
    space, created = EmbeddingSpace.objects.get_or_create(
        provider=provider.name, model=provider.model, defaults={"dimension": provider.dimension}
    )
    if space.dimension != provider.dimension:
        raise EmbeddingDimensionMismatch(
            f"embedding space {space} stores {space.dimension}-dimensional vectors but the "
            f"configured model gives {provider.dimension}; configure a new model name to "
            "start a new space, or set EMBEDDING_DIMENSION back"
        )
    if created and index:
        embedding_space_index_ensure(space=space)
    return space


def embedding_space_index_ensure(*, space: EmbeddingSpace) -> None:
    """Create the space's partial HNSW index on the untyped vector column if missing.

    pgvector indexes a mixed-dimension column through an expression cast to the
    space's dimension, restricted to the space's rows; searches must use the same
    expression and predicate (memories.services.retrieval).
    """
    with connection.cursor() as cursor:
        cursor.execute(index_create_sql(space=space, name=space.index_name, concurrently=False))


@dataclass(frozen=True)
class ModelChoice:
    """A model a project can choose (the setting ``embedding.model``)."""

    key: str
    provider: str
    model: str
    dimension: int
    description: str


def model_choices() -> dict[str, ModelChoice]:
    """The models a project can choose, by key: the two packaged local models, and the
    OpenAI-compatible endpoint when one is configured (EMBEDDING_API_URL, with
    EMBEDDING_API_MODEL and EMBEDDING_API_DIMENSION)."""
    choices = {
        "minilm-l6": ModelChoice(
            "minilm-l6",
            "local",
            "all-MiniLM-L6-v2",
            384,
            "all-MiniLM-L6-v2, 384 dimensions: fast, the default",
        ),
        "mpnet-base": ModelChoice(
            "mpnet-base",
            "local",
            "all-mpnet-base-v2",
            768,
            "all-mpnet-base-v2, 768 dimensions: better recall on short conversational "
            "memories, several times slower to embed (optional install: make mpnet)",
        ),
    }
    config = settings.EMBEDDING
    model, dimension = config["API_MODEL"], int(config["API_DIMENSION"])
    if not model and config["PROVIDER"] == "openai":  # the configured model is the endpoint's
        model, dimension = config["MODEL"], int(config["DIMENSION"])
    if config["API_URL"] and model:
        choices["openai"] = ModelChoice(
            "openai",
            "openai",
            model,
            dimension,
            f"{model} at the OpenAI-compatible endpoint EMBEDDING_API_URL",
        )
    return choices


def choice_of(space: EmbeddingSpace) -> str:
    """The key of the model a space holds, or "provider:model" for a space no choice
    names (a configured model that is not one of them, e.g. the tests' hashing one)."""
    for choice in model_choices().values():
        if (choice.provider, choice.model) == (space.provider, space.model):
            return choice.key
    return f"{space.provider}:{space.model}"


def choice_provider(choice: ModelChoice) -> EmbeddingProvider:
    return provider_get(choice.provider, choice.model, choice.dimension)


def space_provider(space: EmbeddingSpace) -> EmbeddingProvider:
    """The provider that embeds into ``space`` (its model, in this process): the
    configured one (get_provider, which tests replace) for the configured model's space."""
    configured = get_provider()
    if (configured.name, configured.model) == (space.provider, space.model):
        return configured
    return provider_get(space.provider, space.model, space.dimension)


def choice_space(choice: ModelChoice) -> EmbeddingSpace:
    """The space of a chosen model, made on first use without its index: a switch's job
    builds it concurrently (embedding_space_index_build), writes going on."""
    return embedding_space_get(provider=choice_provider(choice), index=False)


def embedding_space_index_build(*, space: EmbeddingSpace) -> None:
    """Build the space's HNSW index concurrently if it has none (or only an invalid one,
    left by a build that was killed), outside any transaction: memories_embedding keeps
    taking every project's vectors meanwhile (a plain CREATE INDEX would block them for
    the scan of the whole table)."""
    state = index_state(name=space.index_name)
    if state is not None and state.valid:
        return
    with connection.cursor() as cursor:
        if state is not None:
            cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {space.index_name}")
        cursor.execute(index_create_sql(space=space, name=space.index_name, concurrently=True))


def default_space() -> EmbeddingSpace:
    """The configured model's space (settings.EMBEDDING), kept DEFAULT_SPACE_SECONDS."""
    provider = get_provider()
    key = (provider.name, provider.model, provider.dimension)
    if (space := _default_space.get(key)) is None:
        space = embedding_space_get(provider=provider)
        _default_space.put(key, space)
    return space


def space_by_id(space_id: int) -> EmbeddingSpace:
    if (space := _spaces_by_id.get(space_id)) is None:
        space = _spaces_by_id[space_id] = EmbeddingSpace.objects.get(pk=space_id)
    return space


def project_space(project: Project) -> EmbeddingSpace:
    """The space ``project`` serves from, as of the row the caller read (a request's
    project is read with its API key, so a flip shows at the next request)."""
    if project.embedding_space_id is None:
        return default_space()
    return space_by_id(project.embedding_space_id)


def project_dimension(project: Project) -> int:
    """The dimension of the vectors of the space ``project`` serves from, without the
    model (the configured one's from the settings)."""
    if project.embedding_space_id is None:
        return int(settings.EMBEDDING["DIMENSION"])
    return space_by_id(project.embedding_space_id).dimension


def project_space_read(project_id: int) -> EmbeddingSpace:
    """The space the project serves from now (read from the database, the configured
    model's space too: workers and commands keep no copy of it)."""
    space_id = Project.objects.filter(pk=project_id).values_list("embedding_space_id", flat=True)
    found = space_id.first()
    return embedding_space_get() if found is None else space_by_id(found)


def memory_spaces(project_ids: Iterable[int]) -> dict[int, list[EmbeddingSpace]]:
    """The spaces a new memory of each project is embedded into: the one it serves from
    first, then the target of its running switch, or the space it left in a switch
    that completed so recently that a process may still read the project's old row
    (the API keys and their projects are kept LOOKUP_CACHE_SECONDS: such a process
    searches the old space, which must not miss what was written since). Read after the
    memories were claimed: a memory written after a switch started is then embedded
    into both (see embedding_switch.py for why that keeps the flip exact)."""
    ids = set(project_ids)
    serving: dict[int, Any] = dict(
        Project.objects.filter(pk__in=ids).values_list("pk", "embedding_space_id")
    )
    recently = timezone.now() - timedelta(seconds=settings.LOOKUP_CACHE_SECONDS + LINGER_MARGIN)
    others: dict[int, set[int]] = {}
    for project_id, status, source, target in EmbeddingSwitch.objects.filter(
        Q(status=EmbeddingSwitch.Status.RUNNING)
        | Q(status=EmbeddingSwitch.Status.COMPLETED, finished_at__gte=recently),
        project_id__in=ids,
    ).values_list("project_id", "status", "source_id", "target_id"):
        running = status == EmbeddingSwitch.Status.RUNNING
        others.setdefault(project_id, set()).add(target if running else source)
    spaces, configured = {}, embedding_space_get()
    for project_id in ids:
        first = serving.get(project_id)
        found = [configured if first is None else space_by_id(first)]
        found += [space_by_id(pk) for pk in sorted(others.get(project_id, ())) if pk != found[0].pk]
        spaces[project_id] = found
    return spaces


def spaces_forget() -> None:
    """Forget the kept spaces (tests: the next test's database is another)."""
    _default_space.clear()
    _spaces_by_id.clear()
