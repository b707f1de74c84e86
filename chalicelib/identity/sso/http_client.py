"""A small outbound HTTP client (stdlib) for identity providers: JSON and form requests with timeouts.

Only ``https`` is allowed; plain ``http`` only to a loopback host and only in the ``local`` and
``test`` stages (local runs and tests point providers at peers on 127.0.0.1). Redirects are not
followed (a provider URL cannot bounce a request elsewhere), and responses are size-capped.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlencode, urlparse

from chalicelib.core.config import settings

TIMEOUT_SECONDS = 10
MAX_RESPONSE_BYTES = 1024 * 1024
LOOPBACK = ("127.0.0.1", "localhost", "::1")
LOOPBACK_STAGES = ("local", "test")


class ProviderError(Exception):
    """The provider could not be reached or answered something unusable."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def allowed_url(url: str) -> bool:
    parsed = urlparse(url)
    if parsed.scheme == "https" and parsed.hostname:
        return True
    return (parsed.scheme == "http" and parsed.hostname in LOOPBACK
            and settings().stage in LOOPBACK_STAGES)


def request(method: str, url: str, *, form: dict[str, str] | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    if not allowed_url(url):
        raise ProviderError(f"refusing non-HTTPS provider URL {url!r}")
    data = urlencode(form).encode() if form is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Accept": "application/json", "User-Agent": "aiplat-identity/1",
        **({"Content-Type": "application/x-www-form-urlencoded"} if form is not None else {}),
        **(headers or {})})
    try:
        with _opener.open(req, timeout=TIMEOUT_SECONDS) as resp:  # noqa: S310 (scheme checked)
            return resp.status, resp.read(MAX_RESPONSE_BYTES)
    except urllib.error.HTTPError as err:
        return err.code, err.read(MAX_RESPONSE_BYTES)
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise ProviderError(f"{method} {url}: {err}") from None


def get_json(url: str, headers: dict[str, str] | None = None) -> Any:
    status, body = request("GET", url, headers=headers)
    if status != 200:
        raise ProviderError(f"GET {url}: HTTP {status}")
    try:
        return json.loads(body)
    except ValueError:
        raise ProviderError(f"GET {url}: not JSON") from None


def post_form(url: str, form: dict[str, str], headers: dict[str, str] | None = None) -> Any:
    status, body = request("POST", url, form=form, headers=headers)
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
