"""schemathesis: every operation of the OpenAPI document, fed generated requests against the
live test server with a real token — never a 5xx, and every answer as documented (status,
content type, body schema). Bounded (a few examples per operation) to keep the suite fast."""

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from portal.iam import tokens
from tests.api.conftest import openapi_document

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def api_schema():
    return schemathesis.openapi.from_dict(openapi_document())


@pytest.fixture
def bearer(world):
    world.members(world.cluster("fuzzed"), 2)
    world.vm("loose")
    _token, secret = tokens.issue_token(user=world.admin, project_id=world.demo.pk, name="fuzz")
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def unthrottled(settings):
    """Set once: the operations run as subtests of one test, and each assignment to
    ``settings`` stacks an override that every later settings lookup walks through (one per
    example, a few hundred of them, overflowed the stack under coverage)."""
    settings.API_RATE_PER_MINUTE = 10**6


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@hypothesis_settings(
    max_examples=4,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_error_and_every_answer_as_documented(case, live_server, bearer, unthrottled):
    case.call_and_validate(
        base_url=live_server.url,
        headers=bearer,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
