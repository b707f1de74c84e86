"""Amazon Bedrock through ``bedrock-runtime`` ``Converse`` / ``ConverseStream``, called in the
workspace's own region with a single-region model id (the registry never offers cross-region inference
profiles). With tools, the request carries ``toolConfig`` and the model's ``toolUse`` blocks come back as
``ToolCall``s; tool results go back as ``toolResult`` blocks. Each model's timeout (``ModelSpec.timeout_s``)
bounds the wait for an answer (a client of its own, no retries) and, streamed, the whole answer: past it,
a ``ProviderError`` with code ``timeout``. moto does not implement Converse; the tests check these
requests with botocore's Stubber."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

from chalicelib.core import aws
from chalicelib.llm.prompt import Completion, Prompt, ToolCall, estimate_tokens, prompt_tokens
from chalicelib.llm.providers.openai_http import ProviderError
from chalicelib.llm.registry import CROSS_REGION_PREFIXES, ModelSpec


def request(spec: ModelSpec, region: str, prompt: Prompt) -> dict[str, Any]:
    """The Converse request: system text apart, user/assistant turns as content blocks."""
    if region not in spec.regions or spec.model.startswith(CROSS_REGION_PREFIXES):
        raise ProviderError(f"{spec.id} does not run in {region}")
    msgs = prompt.with_passages()
    system = [{"text": m["content"]} for m in msgs if m["role"] == "system"]
    turns: list[dict[str, Any]] = []
    for m in msgs:
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            block = {"toolResult": {"toolUseId": m["tool_call_id"], "content": [{"text": m["content"]}],
                                    "status": "error" if m.get("error") else "success"}}
            if turns and turns[-1]["role"] == "user" and "toolResult" in turns[-1]["content"][0]:
                turns[-1]["content"].append(block)  # results of one turn's calls go back together
            else:
                turns.append({"role": "user", "content": [block]})
            continue
        content: list[dict[str, Any]] = [{"text": m["content"]}] if m.get("content") else []
        content += [{"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments or {}}}
                    for c in m.get("tool_calls") or []]
        turns.append({"role": m["role"], "content": content})
    body: dict[str, Any] = {"modelId": spec.model, "messages": turns,
                            "inferenceConfig": {"maxTokens": min(prompt.max_tokens, spec.max_answer_tokens),
                                                "temperature": 0.0}}
    if system:
        body["system"] = system
    if prompt.tools:
        body["toolConfig"] = {"tools": [{"toolSpec": {"name": t["name"], "description": t["description"],
                                                      "inputSchema": {"json": t["parameters"]}}}
                                        for t in prompt.tools], "toolChoice": {"auto": {}}}
    return body


def client(spec: ModelSpec, region: str) -> Any:
    """The region's ``bedrock-runtime`` client that waits at most the model's timeout."""
    return aws.client("bedrock-runtime", region, read_timeout=spec.timeout_s)


def _timed_out(spec: ModelSpec) -> ProviderError:
    return ProviderError(f"{spec.id} did not answer within {spec.timeout_s:g} s", "timeout")


def complete(spec: ModelSpec, region: str, prompt: Prompt) -> Completion:
    try:
        out = client(spec, region).converse(**request(spec, region, prompt))
    except ProviderError:
        raise
    except (ReadTimeoutError, ConnectTimeoutError):
        raise _timed_out(spec) from None
    except Exception as err:  # noqa: BLE001 - botocore errors carry no secrets, but keep the type only
        raise ProviderError(f"{spec.id} failed ({type(err).__name__})") from None
    blocks = ((out.get("output") or {}).get("message") or {}).get("content") or []
    text = "".join(b.get("text", "") for b in blocks)
    calls = [ToolCall(str(u.get("toolUseId", ""))[:64], str(u.get("name", ""))[:128],
                      u.get("input") if isinstance(u.get("input"), dict) else None, json.dumps(u.get("input")))
             for u in (b.get("toolUse") for b in blocks) if isinstance(u, dict)]
    usage = out.get("usage") or {}
    return Completion(text, int(usage.get("inputTokens") or prompt_tokens(prompt)),
                      int(usage.get("outputTokens") or estimate_tokens(text)), calls)


def stream(spec: ModelSpec, region: str, prompt: Prompt) -> Iterator[str | Completion]:
    deadline = time.monotonic() + spec.timeout_s
    try:
        out = client(spec, region).converse_stream(**request(spec, region, prompt))
    except ProviderError:
        raise
    except (ReadTimeoutError, ConnectTimeoutError):
        raise _timed_out(spec) from None
    except Exception as err:  # noqa: BLE001
        raise ProviderError(f"{spec.id} failed ({type(err).__name__})") from None
    parts: list[str] = []
    usage: dict[str, Any] = {}
    events = iter(out.get("stream") or [])
    while True:
        try:
            event = next(events)
        except StopIteration:
            break
        except (ReadTimeoutError, ConnectTimeoutError):
            raise _timed_out(spec) from None
        if time.monotonic() > deadline:
            close = getattr(out.get("stream"), "close", None)
            if close is not None:
                close()  # stop reading: the model's answer is abandoned, not waited for
            raise ProviderError(f"{spec.id} did not finish within {spec.timeout_s:g} s", "timeout")
        delta = ((event.get("contentBlockDelta") or {}).get("delta") or {}).get("text")
        if delta:
            parts.append(delta)
            yield delta
        if "metadata" in event:
            usage = event["metadata"].get("usage") or usage
    text = "".join(parts)
    yield Completion(text, int(usage.get("inputTokens") or prompt_tokens(prompt)),
                     int(usage.get("outputTokens") or estimate_tokens(text)))
