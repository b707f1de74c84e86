"""Any OpenAI-compatible HTTP endpoint: ``POST {base_url}/v1/chat/completions`` (plain, streamed
server-sent events, and with ``tools`` the model answers ``tool_calls``), ``POST {base_url}/v1/embeddings``
and ``GET {base_url}/v1/models``, reached in the workspace's region only (an endpoint per region).

Every request goes through the one outbound client (``core/http/outbound.py``): the host is resolved once and
the connection made to the checked address; redirects are refused and answers are size-capped. An endpoint a workspace declared (a model connection) may reach only public addresses
and those the deployment declares (``OUTBOUND_ALLOW``), plus loopback under ``make run`` with
``LOCAL_ENDPOINTS=1``; the deployment's own provider file is trusted.
Each model has a timeout for the whole answer (``ModelSpec.timeout_s``): past it the request is closed
and a ``ProviderError`` says so. The key is decrypted from KMS and sent as a Bearer token; error
messages never carry it or the response body.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from chalicelib.core.config import settings
from chalicelib.core.http import outbound
from chalicelib.llm import secrets
from chalicelib.llm.prompt import Completion, Prompt, ToolCall, estimate_tokens, prompt_tokens
from chalicelib.llm.registry import Endpoint, ModelSpec

MAX_ANSWER_BYTES = 4 * 1024 * 1024
MAX_TOOL_ARGUMENT_CHARS = 64 * 1024
LOCAL_HINT = ("to use a model server on your own machine with make run, start it with LOCAL_ENDPOINTS=1 "
              "(see docs/api/models.md)")


class ProviderError(Exception):
    """The provider failed; the message is safe to show (no key, no body). ``code`` names the failure."""

    def __init__(self, message: str, code: str = "provider_error") -> None:
        super().__init__(message)
        self.code = code


def policy(ep: Endpoint) -> outbound.Policy:
    """A workspace's endpoint: public and declared addresses only (and loopback when ``LOCAL_ENDPOINTS``
    is on); the deployment's: trusted."""
    return outbound.Policy(private=ep.tenant is None, loopback=settings().local_endpoints)


def key_of(spec: ModelSpec, region: str, ep: Endpoint) -> str | None:
    if not ep.api_key_ciphertext:
        return None
    return secrets.decrypt(region, ep.key_context or spec.provider, ep.api_key_ciphertext)


def failure(name: str, err: outbound.OutboundError, timeout: float) -> ProviderError:
    """The provider error for a failed exchange (its ``code`` names the failure)."""
    if isinstance(err, outbound.Refused):
        hint = f"; {LOCAL_HINT}" if err.kind == "private" else ""
        return ProviderError(f"{name} may not be reached: {err}{hint}", "endpoint_refused")
    if err.kind == "timeout":
        return ProviderError(f"{name} did not answer within {timeout:g} s", "timeout")
    if err.kind == "too_large":
        return ProviderError(f"{name} sent an answer larger than {MAX_ANSWER_BYTES} bytes", "too_large")
    if err.kind == "redirect":
        return ProviderError(f"{name} answered a redirect, which is not followed", "http_error")
    return ProviderError(f"{name} is unreachable or broke off its answer ({err})", "unreachable")


def send(name: str, ep: Endpoint, key: str | None, method: str, path: str, payload: Any, timeout: float
         ) -> outbound.Stream:
    """One request to the endpoint; the open answer when it was 200, a ``ProviderError`` otherwise. The
    whole exchange, reading included, is bounded by ``timeout``."""
    headers = {"Accept": "application/json, text/event-stream", "User-Agent": "aiplat-models/1"}
    body = None
    if payload is not None:
        body = json.dumps(payload).encode()
        headers["Content-Type"] = "application/json"
    if key:
        headers["Authorization"] = "Bearer " + key
    try:
        resp = outbound.open_stream(method, ep.base_url + path, headers=headers, body=body, policy=policy(ep),
                                    timeouts=outbound.Timeouts.within(timeout), max_bytes=MAX_ANSWER_BYTES)
    except outbound.OutboundError as err:
        raise failure(name, err, timeout) from None
    if resp.status != 200:
        resp.close()
        code = {401: "unauthorized", 403: "unauthorized", 404: "not_found"}.get(resp.status, "http_error")
        raise ProviderError(f"{name} answered HTTP {resp.status}", code)
    return resp


def _read(name: str, resp: outbound.Stream, timeout: float) -> bytes:
    try:
        return resp.read()
    except outbound.OutboundError as err:
        raise failure(name, err, timeout) from None
    finally:
        resp.close()


def _request(spec: ModelSpec, region: str, path: str, payload: dict[str, Any]) -> outbound.Stream:
    ep = spec.endpoints.get(region)
    if ep is None:  # the router never gets here; a second guard against leaving the region
        raise ProviderError(f"{spec.id} has no endpoint in {region}")
    return send(spec.id, ep, key_of(spec, region, ep), "POST", path, payload, spec.timeout_s)


def _messages(prompt: Prompt) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in prompt.with_passages():
        if m["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        elif m.get("tool_calls"):
            out.append({"role": "assistant", "content": m.get("content") or None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw}}
                for c in m["tool_calls"]]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def payload(spec: ModelSpec, prompt: Prompt, stream: bool) -> dict[str, Any]:
    """The chat-completions request body (``tools`` when the prompt offers tools)."""
    body: dict[str, Any] = {"model": spec.model, "messages": _messages(prompt),
                            "max_tokens": min(prompt.max_tokens, spec.max_answer_tokens), "temperature": 0}
    if prompt.tools:
        body["tools"] = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                           "parameters": t["parameters"]}} for t in prompt.tools]
        body["tool_choice"] = "auto"
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def parse_tool_calls(raw: Any) -> list[ToolCall]:
    """The ``tool_calls`` of a message; arguments that are not a JSON object are kept as ``None``."""
    calls: list[ToolCall] = []
    for n, c in enumerate(raw if isinstance(raw, list) else []):
        fn = (c or {}).get("function") or {}
        text = fn.get("arguments")
        text = text if isinstance(text, str) else json.dumps(text)
        try:
            args = json.loads(text) if len(text) <= MAX_TOOL_ARGUMENT_CHARS else None
        except ValueError:
            args = None
        calls.append(ToolCall(str(c.get("id") or f"call_{n + 1}")[:64], str(fn.get("name") or "")[:128],
                              args if isinstance(args, dict) else None, text[:MAX_TOOL_ARGUMENT_CHARS]))
    return calls


def complete(spec: ModelSpec, region: str, prompt: Prompt) -> Completion:
    resp = _request(spec, region, "/v1/chat/completions", payload(spec, prompt, False))
    raw = _read(spec.id, resp, spec.timeout_s)
    try:
        data = json.loads(raw)
        message = data["choices"][0]["message"]
        text = message.get("content") or ""
        if not isinstance(text, str):
            raise TypeError
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise ProviderError(f"{spec.id} sent an answer that is not a chat completion", "not_openai") from None
    usage = data.get("usage") or {}
    return Completion(text, int(usage.get("prompt_tokens") or prompt_tokens(prompt)),
                      int(usage.get("completion_tokens") or estimate_tokens(text)),
                      parse_tool_calls(message.get("tool_calls")))


def stream(spec: ModelSpec, region: str, prompt: Prompt) -> Iterator[str | Completion]:
    """Content deltas as they arrive, then the ``Completion``; past the model's timeout, a ``ProviderError``."""
    parts: list[str] = []
    usage: dict[str, Any] = {}
    resp = _request(spec, region, "/v1/chat/completions", payload(spec, prompt, True))
    try:
        while True:
            try:
                raw = resp.readline()
            except outbound.OutboundError as err:
                raise failure(spec.id, err, spec.timeout_s) from None
            if not raw:
                break
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                event = json.loads(data)
                choices = event.get("choices") or []
                usage = event.get("usage") or usage
                deltas = [(c.get("delta") or {}).get("content") for c in choices]
            except (ValueError, AttributeError, TypeError):
                raise ProviderError(f"{spec.id} sent a malformed stream event", "malformed_stream") from None
            for delta in deltas:
                if isinstance(delta, str) and delta:
                    parts.append(delta)
                    yield delta
    finally:
        resp.close()
    text = "".join(parts)
    yield Completion(text, int(usage.get("prompt_tokens") or prompt_tokens(prompt)),
                     int(usage.get("completion_tokens") or estimate_tokens(text)))


def embed(spec: ModelSpec, region: str, texts: list[str]) -> list[list[float]]:
    raw = _read(spec.id, _request(spec, region, "/v1/embeddings", {"model": spec.model, "input": texts}),
                spec.timeout_s)
    try:
        data = json.loads(raw)["data"]
        return [list(map(float, d["embedding"])) for d in sorted(data, key=lambda d: d["index"])]
    except (ValueError, KeyError, TypeError):
        raise ProviderError(f"{spec.id} sent an answer that is not an embedding list", "not_openai") from None


def list_models(name: str, ep: Endpoint, key: str | None, timeout: float) -> list[str]:
    """``GET /v1/models``: the model ids the endpoint serves (``ProviderError`` with a code otherwise)."""
    raw = _read(name, send(name, ep, key, "GET", "/v1/models", None, timeout), timeout)
    try:
        data = json.loads(raw)["data"]
        return [str(d["id"]) for d in data if isinstance(d, dict) and isinstance(d.get("id"), str)]
    except (ValueError, KeyError, TypeError):
        raise ProviderError(f"{name} did not answer like an OpenAI-compatible API (GET /v1/models)",
                            "not_openai") from None
