"""Process settings, read once from the environment.

Every address and name the code needs comes from here, so pointing the platform at moto, LocalStack or
real AWS is only a change of environment (DESIGN.md section 3).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from chalicelib.core.process_state import cached


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
    mail_sender: str
    mail_outbox_dir: str | None  # local runs: every e-mail is also written here
    app_client_id: str  # the app shell's public OAuth client
    domain_verification_url: str  # operator setting: where SSO domain proofs are fetched ({domain})
    outbound_allow: tuple[str, ...]  # OUTBOUND_ALLOW: private addresses the deployment lets tenants reach
    catalog_cache_seconds: float  # how long a catalog version check is trusted (0: check on every read)
    query_time_limit_seconds: float
    query_memory_limit: str
    query_spill_limit: str
    knowledge_cache_seconds: float  # how long a knowledge search trusts a catalog version check
    model_providers: str = ""  # path of the model provider file, or its JSON (docs/api/models.md)
    region: str = ""  # the region this deployment is pinned to ("" = not pinned: global and local tools)
    regional_urls: str = "{}"  # JSON {region: {"base_url", "gateway_url"}}: every region's public addresses
    connector_principal_arn: str = ""  # what workspaces' connector roles trust ("" = the platform's account)
    query_cache_bytes: int = 256 * 1024 * 1024  # per-container budget of cached policy-projected tables
    signin_limit_factor: int = 1  # multiplies the sign-in and mail rate limits (a test stack under a fuzzer)
    api_rate_limit_factor: int = 1  # multiplies the API request quotas (core/http/rate_limits.py)
    chat_answers_inline: bool = False  # CHAT_ANSWERS=inline: an answer runs inside its request (in-process tests)
    chat_post_wait_seconds: float = 25.0  # how long a chat POST waits for its answer (chat/answers.py)
    document_sync_parse_seconds: float = 150.0  # reading time of one documents sync (ingest/sources/documents.py)
    document_limits: tuple[tuple[str, str], ...] = ()  # DOCUMENT_* bounds of one parse (document_text.Bounds)
    child_path: str = "/usr/bin:/bin"  # PATH of the document parser's child process
    otlp_endpoint: str = ""  # OTEL_EXPORTER_OTLP_ENDPOINT: traces exported there, to nothing when empty
    otel_service_name: str = "aiplatform"
    in_lambda: bool = False  # AWS_LAMBDA_FUNCTION_NAME is set: flush telemetry before the process freezes; prime at init
    openlineage_urls: tuple[tuple[str, str], ...] = ()  # OPENLINEAGE_URL and OPENLINEAGE_URL_<REGION>
    local_endpoints: bool = False  # LOCAL_ENDPOINTS=1 under make run: model endpoints on loopback admitted

    @property
    def issuer(self) -> str:
        return self.auth_url


AUDIENCE = "service-api"
DEFAULT_DOMAIN_VERIFICATION_URL = "https://{domain}/.well-known/aiplat-domain-verification.txt"


def _seconds(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


def _url(name: str, default: str) -> str:
    return os.environ.get(name, default).rstrip("/")


@cached(maxsize=1)
def settings() -> Settings:
    """The settings of this process; tests call ``settings.cache_clear()`` after changing the env."""
    return Settings(
        stage=os.environ.get("STAGE", "local"),
        route_group=os.environ.get("ROUTE_GROUP", "platform"),
        auth_url=_url("AUTH_URL", "http://127.0.0.1:8002"),
        base_url=_url("BASE_URL", "http://127.0.0.1:8000"),
        gateway_url=_url("GATEWAY_URL", "http://127.0.0.1:8001"),
        app_url=_url("APP_URL", "http://127.0.0.1:8003"),
        resource_prefix=os.environ.get("RESOURCE_PREFIX", "aiplat"),
        global_region=os.environ.get("GLOBAL_REGION", "us-east-1"),
        access_token_ttl=int(os.environ.get("ACCESS_TOKEN_TTL", "900")),
        max_api_token_ttl=int(os.environ.get("MAX_API_TOKEN_TTL", str(90 * 24 * 3600))),
        log_level=os.environ.get("LOG_LEVEL", "INFO").upper(),
        mail_sender=os.environ.get("MAIL_SENDER", "no-reply@aiplatform.dev"),
        mail_outbox_dir=os.environ.get("MAIL_OUTBOX_DIR") or None,
        app_client_id=os.environ.get("APP_CLIENT_ID", "app-shell"),
        domain_verification_url=os.environ.get("DOMAIN_VERIFICATION_URL", DEFAULT_DOMAIN_VERIFICATION_URL),
        outbound_allow=tuple(e.strip() for e in os.environ.get("OUTBOUND_ALLOW", "").split(",") if e.strip()),
        catalog_cache_seconds=float(os.environ.get("CATALOG_CACHE_SECONDS", "0")),
        query_time_limit_seconds=float(os.environ.get("QUERY_TIME_LIMIT_SECONDS", "10")),
        query_memory_limit=os.environ.get("QUERY_MEMORY_LIMIT", "512MB"),
        query_spill_limit=os.environ.get("QUERY_SPILL_LIMIT", "256MB"),
        knowledge_cache_seconds=float(os.environ.get("KNOWLEDGE_CACHE_SECONDS", "2")),
        model_providers=os.environ.get("MODEL_PROVIDERS", ""),
        region=os.environ.get("REGION", ""),
        regional_urls=os.environ.get("REGIONAL_URLS", "{}"),
        connector_principal_arn=os.environ.get("CONNECTOR_PRINCIPAL_ARN", ""),
        query_cache_bytes=int(os.environ.get("QUERY_CACHE_BYTES", str(256 * 1024 * 1024))),
        signin_limit_factor=max(1, int(os.environ.get("SIGNIN_LIMIT_FACTOR", "1"))),
        api_rate_limit_factor=max(1, int(os.environ.get("API_RATE_LIMIT_FACTOR", "1"))),
        chat_answers_inline=os.environ.get("CHAT_ANSWERS", "queue") == "inline",
        chat_post_wait_seconds=_seconds("CHAT_POST_WAIT_SECONDS", 25.0),
        document_sync_parse_seconds=_seconds("DOCUMENT_SYNC_PARSE_SECONDS", 150.0),
        document_limits=tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("DOCUMENT_"))),
        child_path=os.environ.get("PATH", "/usr/bin:/bin"),
        otlp_endpoint=os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip(),
        otel_service_name=os.environ.get("OTEL_SERVICE_NAME") or "aiplatform",
        in_lambda=bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME")),
        openlineage_urls=tuple(sorted((k, v.strip()) for k, v in os.environ.items()
                                      if (k == "OPENLINEAGE_URL" or k.startswith("OPENLINEAGE_URL_")) and v.strip())),
        # only in the local stage (make run, the tests): a deployment never admits loopback model endpoints
        local_endpoints=os.environ.get("LOCAL_ENDPOINTS", "") == "1" and os.environ.get("STAGE", "local") == "local",
    )
