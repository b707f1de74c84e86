"""Process settings, read once from the environment.

Every address and name the code needs comes from here, so pointing the platform at moto, LocalStack or
real AWS is only a change of environment (DESIGN.md section 3).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Settings:
    stage: str
    route_group: str
    auth_url: str
    base_url: str
    gateway_url: str
    app_url: str
    resource_prefix: str
    global_region: str
    access_token_ttl: int
    max_api_token_ttl: int
    log_level: str
    region: str = ""  # the region this deployment is pinned to ("" = not pinned: global and local tools)
    regional_urls: str = "{}"  # JSON {region: {"base_url", "gateway_url"}}: every region's public addresses

    @property
    def issuer(self) -> str:
        return self.auth_url


AUDIENCE = "service-api"


def _url(name: str, default: str) -> str:
    return os.environ.get(name, default).rstrip("/")


@lru_cache(maxsize=1)
def settings() -> Settings:
    """The settings of this process; tests call ``settings.cache_clear()`` after changing the env."""
    return Settings(
        stage=os.environ.get("STAGE", "local"),
        route_group=os.environ.get("ROUTE_GROUP", "all"),
        auth_url=_url("AUTH_URL", "http://127.0.0.1:8002"),
        base_url=_url("BASE_URL", "http://127.0.0.1:8000"),
        gateway_url=_url("GATEWAY_URL", "http://127.0.0.1:8001"),
        app_url=_url("APP_URL", "http://127.0.0.1:8003"),
        resource_prefix=os.environ.get("RESOURCE_PREFIX", "aiplat"),
        global_region=os.environ.get("GLOBAL_REGION", "us-east-1"),
        access_token_ttl=int(os.environ.get("ACCESS_TOKEN_TTL", "900")),
        max_api_token_ttl=int(os.environ.get("MAX_API_TOKEN_TTL", str(90 * 24 * 3600))),
        log_level=os.environ.get("LOG_LEVEL", "INFO"),
        region=os.environ.get("REGION", ""),
        regional_urls=os.environ.get("REGIONAL_URLS", "{}"),
    )
