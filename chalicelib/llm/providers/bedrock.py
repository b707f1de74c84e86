"""Amazon Bedrock through ``bedrock-runtime`` ``Converse`` / ``ConverseStream``, called in the
workspace's own region with a single-region model id (the registry never offers cross-region inference
profiles). moto does not implement Converse; the tests check these requests with botocore's Stubber."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chalicelib.core import aws
from chalicelib.llm.prompt import Completion, Prompt, estimate_tokens, prompt_tokens
from chalicelib.llm.providers.openai_http import ProviderError
from chalicelib.llm.registry import CROSS_REGION_PREFIXES, ModelSpec


def request(spec: ModelSpec, region: str, prompt: Prompt) -> dict[str, Any]:
    """The Converse request: system text apart, user/assistant turns as content blocks."""
    if region not in spec.regions or spec.model.startswith(CROSS_REGION_PREFIXES):
        raise ProviderError(f"{spec.id} does not run in {region}")
    msgs = prompt.with_passages()
    system = [{"text": m["content"]} for m in msgs if m["role"] == "system"]
    turns = [{"role": m["role"], "content": [{"text": m["content"]}]} for m in msgs if m["role"] != "system"]
    body: dict[str, Any] = {"modelId": spec.model, "messages": turns,
                            "inferenceConfig": {"maxTokens": prompt.max_tokens, "temperature": 0.0}}
    if system:
        body["system"] = system
    return body


def _client(region: str) -> Any:
    return aws.client("bedrock-runtime", region)


def complete(spec: ModelSpec, region: str, prompt: Prompt) -> Completion:
    try:
        out = _client(region).converse(**request(spec, region, prompt))
    except ProviderError:
        raise
    except Exception as err:  # noqa: BLE001 - botocore errors carry no secrets, but keep the type only
        raise ProviderError(f"{spec.id} failed ({type(err).__name__})") from None
    blocks = ((out.get("output") or {}).get("message") or {}).get("content") or []
    text = "".join(b.get("text", "") for b in blocks)
    usage = out.get("usage") or {}
    return Completion(text, int(usage.get("inputTokens") or prompt_tokens(prompt)),
                      int(usage.get("outputTokens") or estimate_tokens(text)))


def stream(spec: ModelSpec, region: str, prompt: Prompt) -> Iterator[str | Completion]:
    try:
        out = _client(region).converse_stream(**request(spec, region, prompt))
    except ProviderError:
        raise
    except Exception as err:  # noqa: BLE001
        raise ProviderError(f"{spec.id} failed ({type(err).__name__})") from None
    parts: list[str] = []
    usage: dict[str, Any] = {}
    for event in out.get("stream") or []:
        delta = ((event.get("contentBlockDelta") or {}).get("delta") or {}).get("text")
        if delta:
            parts.append(delta)
            yield delta
        if "metadata" in event:
            usage = event["metadata"].get("usage") or usage
    text = "".join(parts)
    yield Completion(text, int(usage.get("inputTokens") or prompt_tokens(prompt)),
                     int(usage.get("outputTokens") or estimate_tokens(text)))
