"""Schemathesis over the served OpenAPI document: the server and its document agree.

A real ``toolkit serve`` on loopback over the world of ``server_world``; the schema is
read from the server itself (``GET /api/json/openapi.json``) and every operation is
fuzzed as an authenticated caller with four checks: no 5xx, every response matches its
documented schema, status code and content type. The default run is bounded (a fixed
seed, few examples per operation); ``-m fuzz_long`` runs the same with many more.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from server_world import ServedWorld, served_world

CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]
SEED = 20261123
# Examples per operation in the fuzzing phase: with the coverage phase, about a minute for
# both callers on a 2-core machine.
DEFAULT_EXAMPLES = 12
LONG_EXAMPLES = int(os.environ.get("TOOLKIT_FUZZ_EXAMPLES", "300"))


@pytest.fixture(scope="module")
def fuzz_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedWorld]:
    with served_world(tmp_path_factory.mktemp("fuzz")) as world:
        yield world


def _schema(
    world: ServedWorld, user: str, examples: int, *, coverage: bool
) -> schemathesis.BaseSchema:
    config = schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "headers": {"X-Site": "alpha", "Authorization": f"Bearer {world.tokens[user]}"},
            "generation": {
                "mode": "all",
                "max-examples": examples,
                "deterministic": True,
                "database": "none",
            },
            "phases": {
                "examples": {"enabled": True},
                "coverage": {"enabled": coverage},
                "fuzzing": {"enabled": True},
                "stateful": {"enabled": False},
            },
            "request-timeout": 60,
            "cache": {"enabled": False},
        }
    )
    return schemathesis.openapi.from_url(f"{world.url}/api/json/openapi.json", config=config)


# The coverage phase (boundary and invalid values of every parameter, unexpected methods)
# is most of the time; what differs between callers is only who may, so it runs once.
@pytest.fixture
def duty_schema(fuzz_world: ServedWorld) -> schemathesis.BaseSchema:
    return _schema(fuzz_world, "duty", DEFAULT_EXAMPLES, coverage=False)


@pytest.fixture
def admin_schema(fuzz_world: ServedWorld) -> schemathesis.BaseSchema:
    return _schema(fuzz_world, "admin", DEFAULT_EXAMPLES, coverage=True)


@pytest.fixture
def long_schema(fuzz_world: ServedWorld) -> schemathesis.BaseSchema:
    return _schema(fuzz_world, "admin", LONG_EXAMPLES, coverage=True)


as_duty = schemathesis.pytest.from_fixture("duty_schema")
as_admin = schemathesis.pytest.from_fixture("admin_schema")
long_run = schemathesis.pytest.from_fixture("long_schema")


@as_duty.parametrize()
def test_fuzz_as_a_user_on_duty(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=CHECKS)


@as_admin.parametrize()
def test_fuzz_as_an_administrator(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=CHECKS)


@pytest.mark.fuzz_long
@long_run.parametrize()
def test_fuzz_long(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=CHECKS)
