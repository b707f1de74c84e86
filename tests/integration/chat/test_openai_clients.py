"""The official ``openai`` SDK and ``langchain-openai`` against `make run`'s platform API (``base_url`` =
{base_url}/v1, the API token as the key): the model list, a plain and a streamed grounded completion whose
citations verify against the knowledge search, an unknown model, and bad input answered with OpenAI-shaped
400s while nothing is stored."""
from __future__ import annotations

from typing import Any

import openai
import pytest
import requests
from langchain_openai import ChatOpenAI
from openai import OpenAI

from tests.integration.conftest import RunningPlatform

pytestmark = pytest.mark.integration
QUESTION = "How long do customers have to return an order?"


def sdk(platform: RunningPlatform, key: str | None = None) -> OpenAI:
    return OpenAI(base_url=platform.urls["platform"], api_key=key or platform.demo["api_token"], max_retries=0)


def chat_count(platform: RunningPlatform) -> int:
    r = requests.get(platform.urls["platform"] + "/chats", params={"limit": 200},
                     headers={"Authorization": f"Bearer {platform.demo['api_token']}"}, timeout=30)
    assert r.status_code == 200, r.text
    return len(r.json()["items"])


def verify(platform: RunningPlatform, citations: list[dict[str, Any]]) -> None:
    """Each citation's quote is in the passage the knowledge search returns for its chunk."""
    assert citations
    for cit in citations:
        assert cit["verified"] is True
        hits = requests.get(platform.urls["gateway"] + "/v1/knowledge/search", params={"q": cit["quote"], "k": 10},
                            headers={"Authorization": f"Bearer {platform.demo['api_token']}"}, timeout=30).json()["items"]
        assert any(h["chunk_id"] == cit["chunk_id"] and cit["quote"] in h["text"] for h in hits), cit


def test_models_list(platform: RunningPlatform) -> None:
    ids = [m.id for m in sdk(platform).models.list()]
    assert ids[0] == "auto" and "builtin/extractive" in ids


def test_plain_and_streamed_grounded_completion(platform: RunningPlatform) -> None:
    client = sdk(platform)
    done = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": QUESTION}])
    assert "within 30 days of delivery" in done.choices[0].message.content and "[1]" in done.choices[0].message.content
    extra = done.model_extra or {}
    assert extra["grounding"]["ratio"] > 0
    verify(platform, extra["citations"])
    assert done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens

    stream = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": QUESTION}],
                                            stream=True, stream_options={"include_usage": True})
    pieces, citations, usage = [], [], None
    for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            citations += (chunk.model_extra or {}).get("citations") or []
        if chunk.usage:
            usage = chunk.usage
    assert "within 30 days of delivery" in "".join(pieces)
    verify(platform, citations)
    assert usage is not None and usage.total_tokens > 0


def test_langchain(platform: RunningPlatform) -> None:
    llm = ChatOpenAI(model="auto", base_url=platform.urls["platform"], api_key=platform.demo["api_token"],
                     max_retries=0)
    answer = llm.invoke(QUESTION)
    assert "within 30 days of delivery" in str(answer.content)
    streamed = "".join(str(part.content) for part in llm.stream(QUESTION))
    assert "within 30 days of delivery" in streamed


def test_unknown_model_and_bad_input_store_nothing(platform: RunningPlatform) -> None:
    client = sdk(platform)
    before = chat_count(platform)
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(model="nope/model", messages=[{"role": "user", "content": QUESTION}])
    assert unknown.value.code == "model_not_found"
    bad: list[tuple[dict[str, Any], str]] = [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": QUESTION}], "extra_body": {"frobnicate": True}}, "frobnicate"),
        ({"messages": [{"role": "user", "content": QUESTION}], "extra_body": {"temperature": "hot"}}, "temperature"),
        ({"messages": [{"role": "user", "content": QUESTION}],
          "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]}, "tools"),
    ]
    for kwargs, param in bad:
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model="auto", **kwargs)
        assert refused.value.status_code == 400 and refused.value.param == param, refused.value.body
        assert refused.value.type == "invalid_request_error"
    assert chat_count(platform) == before
