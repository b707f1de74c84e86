"""Domain squatting: an unverified claim on a domain never blocks the real owner; verification decides."""
from __future__ import annotations

import pytest

from chalicelib.core.http.errors import ApiError
from chalicelib.identity.sso import connections
from tests.functional.conftest import make_tenant


class PublishedFile:
    """The domain's published verification file, as the real owner wrote it (the well-known-file
    verifier fetches it over HTTPS in production; here its content is given directly)."""

    def __init__(self, *tokens: str) -> None:
        self.tokens = list(tokens)

    def published_tokens(self, domain: str) -> list[str]:
        return self.tokens


def _claim(workspace_id: str, user_id: str, domain: str = "corp.example") -> connections.SsoConnectionAttrs:
    return connections.create(workspace_id=workspace_id, created_by=user_id, kind="identity_platform",
                              domain=domain, issuer="https://idp.example", client_id="c", client_secret="s")


def test_an_unverified_squatter_does_not_block_the_owner(stack: None) -> None:
    squatter = make_tenant("mallory@attacker.example", name="Squat")
    owner = make_tenant("it@corp.example", name="Corp")
    _claim(squatter.workspace_id, squatter.user_id)
    conn = _claim(owner.workspace_id, owner.user_id)  # not 409 domain_taken
    assert conn.workspace_id == owner.workspace_id
    file = PublishedFile(conn.verification_token)
    # the squatter claims again, and even tries to verify: the owner's file does not name the squatter
    again = _claim(squatter.workspace_id, squatter.user_id)
    assert connections.verify_domain(again, file) is False
    assert connections.routed("corp.example") is None
    # the owner's token did not change, so re-claiming and verifying wins at once
    conn = _claim(owner.workspace_id, owner.user_id)
    assert conn.verification_token == file.tokens[0]
    assert connections.verify_domain(conn, file) is True
    routed = connections.routed("corp.example")
    assert routed is not None
    assert routed.workspace_id == owner.workspace_id


def test_a_verified_domain_is_not_taken_over(stack: None) -> None:
    owner = make_tenant("it@corp.example", name="Corp")
    squatter = make_tenant("mallory@attacker.example", name="Squat")
    conn = _claim(owner.workspace_id, owner.user_id)
    assert connections.verify_domain(conn, PublishedFile(conn.verification_token))
    with pytest.raises(ApiError) as err:
        _claim(squatter.workspace_id, squatter.user_id)
    assert err.value.status == 409
    assert connections.get("corp.example").workspace_id == owner.workspace_id


def test_tokens_are_bound_to_workspace_and_domain() -> None:
    assert connections.verification_token("ws_a", "corp.example") != connections.verification_token("ws_b",
                                                                                                    "corp.example")
    assert connections.verification_token("ws_a", "corp.example") != connections.verification_token("ws_a",
                                                                                                    "other.example")
