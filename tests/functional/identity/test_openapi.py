"""The identity service's OpenAPI document says what its OAuth endpoints accept and answer (the checks
every group's document passes are in ``tests/functional/core/test_openapi.py``)."""
from __future__ import annotations

from tests.functional.core.test_openapi import served


def test_form_endpoints_say_so_and_answer_rfc_6749_errors() -> None:
    doc = served("identity")
    for path in ("/oauth2/token", "/oauth2/introspect", "/oauth2/revoke"):
        op = doc["paths"][path]["post"]
        assert list(op["requestBody"]["content"]) == ["application/x-www-form-urlencoded"]
        assert op["responses"]["400"] == {"$ref": "#/components/responses/OAuthError"}
