"""`make run` over real HTTP: the demo workspace answers a question about its demo data with verified
citations (plain and streamed), and retrieval is served on the gateway."""
from __future__ import annotations

import json

import requests

from tests.integration.conftest import RunningPlatform

QUESTION = "How long do customers have to return an order?"


def _headers(platform: RunningPlatform) -> dict[str, str]:
    return {"Authorization": f"Bearer {platform.demo['api_token']}", "Content-Type": "application/json"}


def test_demo_workspace_answers_with_citations(platform: RunningPlatform) -> None:
    r = requests.post(platform.urls["platform"] + "/chats", headers=_headers(platform), timeout=60,
                      data=json.dumps({"model": "auto", "messages": [{"role": "user", "content": QUESTION}]}))
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["model"] == "builtin/extractive" and body["region"] == "us-east-1"
    assert "within 30 days of delivery" in body["message"]["content"]
    assert any(c["title"] == "returns-policy.md" and c["verified"] for c in body["citations"])
    assert requests.get(platform.urls["platform"] + f"/chats/{body['chat_id']}", headers=_headers(platform),
                        timeout=30).json()["messages"][-1]["content"] == body["message"]["content"]


def test_demo_stream_and_search(platform: RunningPlatform) -> None:
    r = requests.post(platform.urls["platform"] + "/chats", headers=_headers(platform), timeout=60,
                      data=json.dumps({"model": "auto", "stream": True,
                                       "messages": [{"role": "user", "content": QUESTION}]}))
    assert r.status_code == 201 and r.headers["Content-Type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    s = requests.get(platform.urls["gateway"] + "/v1/knowledge/search", params={"q": "refund enterprise plan"},
                     headers=_headers(platform), timeout=30)
    assert s.status_code == 200 and s.json()["items"]
