"""Identity-provider calls (discovery, tokens, keys, user info, domain proofs): JSON and form requests made
through the one outbound client (``core/http/outbound.py``), with the rules that are the identity context's own.

Only ``https`` is allowed; plain ``http`` only to a loopback host and only in the ``local`` and ``test``
stages (local runs and tests point providers at peers on 127.0.0.1). A provider's host must resolve to
public addresses (or ones the deployment declares in ``OUTBOUND_ALLOW``; any in the local and test
stages), the connection is pinned to the checked address, redirects are refused (a provider URL cannot
bounce a request elsewhere), and answers are size-capped. The deployment's own identity service
(``settings().auth_url``) is called with ``outbound.TRUSTED``.
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode, urlparse

from chalicelib.core.config import settings
from chalicelib.core.http import outbound

TIMEOUT_SECONDS = 10
MAX_RESPONSE_BYTES = 1024 * 1024
LOOPBACK = ("127.0.0.1", "localhost", "::1")
LOOPBACK_STAGES = ("local", "test")


class ProviderError(Exception):
    """The provider could not be reached or answered something unusable."""


def allowed_url(url: str) -> bool:
    parsed = urlparse(url)
    if parsed.scheme == "https" and parsed.hostname:
        return True
    return (parsed.scheme == "http" and parsed.hostname in LOOPBACK
            and settings().stage in LOOPBACK_STAGES)


def provider_policy() -> outbound.Policy:
    """Public and declared addresses; any in the local and test stages (their providers are loopback peers)."""
    return outbound.Policy(private=settings().stage in LOOPBACK_STAGES)


def request(method: str, url: str, *, form: dict[str, str] | None = None,
            headers: dict[str, str] | None = None, policy: outbound.Policy | None = None) -> tuple[int, bytes]:
    if not allowed_url(url):
        raise ProviderError(f"refusing non-HTTPS provider URL {url!r}")
    data = urlencode(form).encode() if form is not None else None
    sent = {"Accept": "application/json", "User-Agent": "aiplat-identity/1",
            **({"Content-Type": "application/x-www-form-urlencoded"} if form is not None else {}),
            **(headers or {})}
    try:
        answer = outbound.request(method, url, headers=sent, body=data, policy=policy or provider_policy(),
                                  timeouts=outbound.Timeouts.within(TIMEOUT_SECONDS),
                                  max_bytes=MAX_RESPONSE_BYTES)
    except outbound.OutboundError as err:
        raise ProviderError(f"{method} {url}: {err}") from None
    return answer.status, answer.body


def get_json(url: str, headers: dict[str, str] | None = None) -> Any:
    status, body = request("GET", url, headers=headers)
    if status != 200:
        raise ProviderError(f"GET {url}: HTTP {status}")
    try:
        return json.loads(body)
    except ValueError:
        raise ProviderError(f"GET {url}: not JSON") from None


def post_form(url: str, form: dict[str, str], headers: dict[str, str] | None = None,
              policy: outbound.Policy | None = None) -> Any:
    status, body = request("POST", url, form=form, headers=headers, policy=policy)
    try:
        parsed = json.loads(body)
    except ValueError:
        raise ProviderError(f"POST {url}: HTTP {status}, not JSON") from None
    if status != 200:
        raise ProviderError(f"POST {url}: HTTP {status} {str(parsed)[:200]}")
    return parsed


def get_text(url: str, max_bytes: int = 4096) -> str | None:
    """The body of a GET (for domain verification files), or None when unreachable / not 200."""
    try:
        status, body = request("GET", url, headers={"Accept": "text/plain"})
    except ProviderError:
        return None
    return body[:max_bytes].decode("utf-8", "replace") if status == 200 else None
