"""Fixtures of the console's tests: the Documents tab's embedder comes from the ingestion
tests' (the hashing embedder: these tests look at the console, not at meaning)."""

from tests.ingestion.conftest import hashing  # noqa: F401 - a fixture, used by name
