"""Token audiences: who an access token is for (RFC 8707 resource indicators, RFC 9068 ``aud``).

Two kinds of protected resource accept the platform's access tokens, and neither accepts the other's
(no token passthrough, docs/security.md "Token audiences"):

* ``service-api``: the platform API, the gateway's REST and GraphQL routes, the identity service's userinfo,
  introspection and token exchange. Every token the platform issues without a ``resource`` has it.
* the MCP resource of each regional gateway, ``{gateway_url}/mcp``: only the MCP endpoint accepts tokens
  issued for it. A regional MCP endpoint verifies a token issued for any region's MCP resource, so that a
  workspace of another region is answered 421 with its address (as REST does), and acts only on tokens
  issued for its own resource.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from chalicelib.core.config import AUDIENCE, settings
from chalicelib.core.regions import OPEN_REGIONS, endpoints

MCP_PATH = "/mcp"


def mcp_resource() -> str:
    """This deployment's MCP resource identifier (its canonical URL)."""
    return settings().gateway_url + MCP_PATH


@lru_cache(maxsize=8)
def _mcp_resources(gateway_url: str, regional_urls: str) -> frozenset[str]:
    json.loads(regional_urls or "{}")  # the cache key; endpoints() reads the same setting
    return frozenset({gateway_url + MCP_PATH} | {endpoints(r)["gateway_url"] + MCP_PATH for r in OPEN_REGIONS})


def mcp_resources() -> frozenset[str]:
    """Every region's MCP resource: the values the identity service accepts as ``resource``."""
    s = settings()
    return _mcp_resources(s.gateway_url, s.regional_urls)


@dataclass(frozen=True)
class Audience:
    """Which ``aud`` values a surface verifies, and which one it acts on (``home``)."""

    name: str

    def accepts(self, aud: Any) -> bool:
        if self.name == API.name:
            return aud == AUDIENCE or (isinstance(aud, list) and AUDIENCE in aud)
        return isinstance(aud, str) and aud in mcp_resources()

    def home(self) -> str:
        return AUDIENCE if self.name == API.name else mcp_resource()

    def is_home(self, aud: Any) -> bool:
        home = self.home()
        return aud == home or (self.name == API.name and isinstance(aud, list) and home in aud)


API = Audience("service-api")
MCP = Audience("mcp")
