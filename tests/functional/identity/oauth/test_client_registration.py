"""How MCP clients come to exist and what their tokens are for: RFC 7591 registration (bad metadata refused,
nothing stored), Client ID Metadata Documents (the fetch's SSRF guards; a document that does not name its own
URL is refused), RFC 8707 ``resource`` (only the platform's MCP endpoints), and the metadata documents."""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from chalice.test import Client

from chalicelib.core.tokens import mcp_resource, mcp_resources
from chalicelib.groups import create_app
from chalicelib.identity.oauth.clients import get_client
from chalicelib.identity.oauth.registration import metadata_documents

CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def register(c: Client, body: Any) -> Any:
    return c.http.post("/oauth2/register", headers={"Content-Type": "application/json"}, body=json.dumps(body))


def authorize(c: Client, client_id: str, redirect: str, **extra: str) -> Any:
    q = {"client_id": client_id, "redirect_uri": redirect, "response_type": "code", "state": "s",
         "code_challenge": CHALLENGE, "code_challenge_method": "S256", **extra}
    return c.http.get("/oauth2/authorize?" + urlencode(q))


def test_dynamic_registration_and_its_refusals(stack: None) -> None:
    with Client(create_app("identity")) as c:
        ok = register(c, {"redirect_uris": ["http://127.0.0.1:7777/cb"], "token_endpoint_auth_method": "none",
                          "grant_types": ["authorization_code", "refresh_token"], "client_name": "cli"})
        assert ok.status_code == 201, ok.body
        made = json.loads(ok.body)
        assert "client_secret" not in made and get_client(made["client_id"]).confidential is False
        for bad, error in ((["http://evil.example/cb"], "invalid_redirect_uri"),
                           (["https://x.example/cb#frag"], "invalid_redirect_uri"), ([], "invalid_redirect_uri")):
            r = register(c, {"redirect_uris": bad, "token_endpoint_auth_method": "none"})
            assert r.status_code == 400 and json.loads(r.body)["error"] == error
        r = register(c, {"redirect_uris": ["https://x.example/cb"], "grant_types": ["client_credentials"]})
        assert json.loads(r.body)["error"] == "invalid_client_metadata"
        meta = json.loads(c.http.get("/.well-known/oauth-authorization-server").body)
        assert meta["registration_endpoint"].endswith("/oauth2/register")
        assert meta["client_id_metadata_document_supported"] is True and "mfa" in meta["scopes_supported"]


def test_resource_must_be_an_mcp_endpoint(stack: None) -> None:
    with Client(create_app("identity")) as c:
        cid = json.loads(register(c, {"redirect_uris": ["http://127.0.0.1:7777/cb"],
                                      "token_endpoint_auth_method": "none"}).body)["client_id"]
        r = authorize(c, cid, "http://127.0.0.1:7777/cb", resource="https://evil.example/mcp")
        assert r.status_code == 302
        back = parse_qs(urlsplit(r.headers["Location"]).query)
        assert back["error"] == ["invalid_target"] and back["iss"]  # RFC 9207 on errors too
        r = authorize(c, cid, "http://127.0.0.1:7777/cb", resource=mcp_resource())
        assert r.status_code == 302 and "/signin" in r.headers["Location"]  # valid: the user signs in next
    assert mcp_resource() in mcp_resources()


def test_metadata_document_fetch_guards() -> None:
    assert metadata_documents.is_metadata_url("https://client.example/oauth/metadata.json")
    for url in ("http://client.example/m.json", "https://client.example/", "https://u:p@client.example/m",
                "https://client.example/m#x"):
        assert not metadata_documents.is_metadata_url(url), url
    # address literals and names resolving to private addresses are never fetched
    assert metadata_documents._fetch("https://127.0.0.1/m.json") is None
    assert metadata_documents._fetch("https://localhost/m.json") is None
    assert metadata_documents._fetch("https://169.254.169.254/latest/meta-data") is None


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The document a client serves (the network fetch itself is covered by the guards above)."""
    docs: dict[str, Any] = {}
    monkeypatch.setattr(metadata_documents, "_fetch", lambda url: docs.get(url))
    metadata_documents.forget()
    return docs


def test_metadata_document_client(stack: None, served: dict[str, Any]) -> None:
    url = "https://client.example/oauth/client.json"
    served[url] = {"client_id": url, "client_name": "Example", "redirect_uris": ["http://127.0.0.1:7777/cb"],
                   "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none"}
    other = "https://client.example/oauth/other.json"
    served[other] = {**served[url], "client_id": "https://elsewhere.example/x.json"}  # names another URL
    with Client(create_app("identity")) as c:
        r = authorize(c, url, "http://127.0.0.1:7777/cb", resource=mcp_resource())
        assert r.status_code == 302 and "/signin" in r.headers["Location"]
        assert authorize(c, url, "http://127.0.0.1:9999/other").status_code == 400  # not a listed redirect URI
        assert authorize(c, other, "http://127.0.0.1:7777/cb").status_code == 400  # refused document
    client = get_client(url)
    assert client is not None and client.confidential is False and client.grants == ["authorization_code",
                                                                                     "refresh_token"]
