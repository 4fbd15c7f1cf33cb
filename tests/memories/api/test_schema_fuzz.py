"""schemathesis over the live OpenAPI schema: every operation, a bounded number of
generated requests each (fixed seed), through Django's WSGI handler with a project
key. No response may be a 5xx, and every status code must be one the schema lists."""

from __future__ import annotations

import json

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

EXAMPLES = 15  # per operation: with ~50 operations, about a thousand requests


def _live_schema() -> schemathesis.schemas.BaseSchema:
    """The document /api/schema/ serves, as schemathesis reads it."""
    document = SchemaGenerator().get_schema(request=None, public=True)
    loaded = schemathesis.openapi.from_dict(json.loads(OpenApiJsonRenderer().render(document)))
    loaded.app = WSGIHandler()
    return loaded.include(path_regex="^/api/v1/")


schema = _live_schema()


@pytest.fixture
def unthrottled(owner):
    """The owner's key without rate limits, so the run reaches every operation."""
    owner.project.settings = {"limits": {"reads_per_minute": 0, "writes_per_minute": 0}}
    owner.project.save(update_fields=["settings"])
    return owner


@pytest.mark.slow
@pytest.mark.django_db(
    transaction=True
)  # the WSGI handler closes a connection left in a transaction
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    derandomize=True,  # the same requests on every run
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_no_5xx_and_only_documented_status_codes(case, unthrottled):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {unthrottled.raw_key}"},
        checks=[not_a_server_error, status_code_conformance],
    )
