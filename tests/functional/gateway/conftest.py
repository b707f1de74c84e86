"""Fixtures of the gateway tests."""
from tests.functional.gateway.local_api import api  # noqa: F401 - the local JSON API fixture
