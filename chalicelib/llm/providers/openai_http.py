"""Any OpenAI-compatible HTTP endpoint: ``POST {base_url}/v1/chat/completions`` (plain and streamed
server-sent events) and ``POST {base_url}/v1/embeddings``, reached in the workspace's region only (the
registry lists an endpoint per region). The key is decrypted from KMS and sent as a Bearer token;
error messages never carry it or the response body."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

from chalicelib.llm import secrets
from chalicelib.llm.prompt import Completion, Prompt, estimate_tokens, prompt_tokens
from chalicelib.llm.registry import ModelSpec

TIMEOUT_S = 60


class ProviderError(Exception):
    """The provider failed; the message is safe to show (no key, no body)."""


def _request(spec: ModelSpec, region: str, path: str, payload: dict[str, Any]) -> Any:
    ep = spec.endpoints.get(region)
    if ep is None:  # the router never gets here; a second guard against leaving the region
        raise ProviderError(f"{spec.id} has no endpoint in {region}")
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if ep.api_key_ciphertext:
        headers["Authorization"] = "Bearer " + secrets.decrypt(region, spec.provider, ep.api_key_ciphertext)
    req = urllib.request.Request(ep.base_url + path, data=json.dumps(payload).encode(), headers=headers,
                                 method="POST")
    try:
        return urllib.request.urlopen(req, timeout=TIMEOUT_S)  # noqa: S310 - http(s) only (registry)
    except urllib.error.HTTPError as err:
        raise ProviderError(f"{spec.id} answered HTTP {err.code}") from None
    except (urllib.error.URLError, OSError) as err:
        raise ProviderError(f"{spec.id} is unreachable ({type(err).__name__})") from None


def _payload(spec: ModelSpec, prompt: Prompt, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": spec.model, "messages": prompt.with_passages(), "max_tokens": prompt.max_tokens,
                            "temperature": 0}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def complete(spec: ModelSpec, region: str, prompt: Prompt) -> Completion:
    with _request(spec, region, "/v1/chat/completions", _payload(spec, prompt, False)) as resp:
        try:
            data = json.loads(resp.read())
            text = data["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise ProviderError(f"{spec.id} sent an answer that is not a chat completion") from None
    usage = data.get("usage") or {}
    return Completion(text, int(usage.get("prompt_tokens") or prompt_tokens(prompt)),
                      int(usage.get("completion_tokens") or estimate_tokens(text)))


def stream(spec: ModelSpec, region: str, prompt: Prompt) -> Iterator[str | Completion]:
    """Content deltas as they arrive, then the ``Completion``."""
    parts: list[str] = []
    usage: dict[str, Any] = {}
    with _request(spec, region, "/v1/chat/completions", _payload(spec, prompt, True)) as resp:
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                event = json.loads(data)
            except ValueError:
                raise ProviderError(f"{spec.id} sent a malformed stream event") from None
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                delta = (choice.get("delta") or {}).get("content")
                if delta:
                    parts.append(delta)
                    yield delta
    text = "".join(parts)
    yield Completion(text, int(usage.get("prompt_tokens") or prompt_tokens(prompt)),
                     int(usage.get("completion_tokens") or estimate_tokens(text)))


def embed(spec: ModelSpec, region: str, texts: list[str]) -> list[list[float]]:
    with _request(spec, region, "/v1/embeddings", {"model": spec.model, "input": texts}) as resp:
        try:
            data = json.loads(resp.read())["data"]
            return [list(map(float, d["embedding"])) for d in sorted(data, key=lambda d: d["index"])]
        except (ValueError, KeyError, TypeError):
            raise ProviderError(f"{spec.id} sent an answer that is not an embedding list") from None
