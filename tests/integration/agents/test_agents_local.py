"""Over HTTP against `make run`'s stack (``infra/local_run.py`` in a subprocess, its own emulator): the
demo agent's run goes queued -> in_progress -> completed through the real queue and the worker loop,
its events stream with sequence numbers and resume from Last-Event-ID, the start is idempotent and audited
with its correlation ID, and bad input is a problem answer."""
from __future__ import annotations

import time

import requests

from tests.integration.conftest import RunningPlatform

TIMEOUT_S = 60


def _h(platform: RunningPlatform, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {platform.demo['api_token']}", **extra}


def _parse(body: str) -> list[dict[str, str]]:
    out = []
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "id" in fields:
            out.append(fields)
    return out


def test_demo_agent_run_completes_through_the_queue_and_worker_loop(platform: RunningPlatform) -> None:
    base = platform.urls["platform"]
    agent_id = platform.demo["agent_id"]
    r = requests.post(f"{base}/agents/{agent_id}/runs", timeout=10,
                      json={"input": {"question": "Which country brings the most paid revenue?"}},
                      headers=_h(platform, **{"X-Correlation-Id": "it-agent-run-0001", "Idempotency-Key": "it-1"}))
    assert r.status_code == 202, r.text
    run = r.json()
    assert run["status"] == "queued"
    statuses = [run["status"]]
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        got = requests.get(f"{base}/agents/{agent_id}/runs/{run['id']}", headers=_h(platform), timeout=10).json()
        if got["status"] != statuses[-1]:
            statuses.append(got["status"])
        if got["status"] in ("completed", "failed", "cancelled", "expired"):
            break
        time.sleep(0.05)
    assert got["status"] == "completed", got
    assert [s["name"] for s in got["steps"]] == ["find", "schema", "revenue", "remember"]
    assert got["output"]["answer"] and got["output"]["provider"] == "extractive"
    assert got["correlation_id"] == "it-agent-run-0001"
    assert statuses[0] == "queued" and statuses[-1] == "completed"

    # the event stream: run.queued, run.started, steps, run.completed; resume after an id
    r = requests.get(f"{base}/agents/{agent_id}/runs/{run['id']}/events", headers=_h(platform), timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events = _parse(r.text)
    assert [e["event"] for e in events][:2] == ["run.queued", "run.started"]
    assert events[-1]["event"] == "run.completed"
    assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))
    r = requests.get(f"{base}/agents/{agent_id}/runs/{run['id']}/events", timeout=10,
                     headers=_h(platform, **{"Last-Event-ID": events[2]["id"]}))
    assert [e["id"] for e in _parse(r.text)] == [e["id"] for e in events[3:]]

    # replay of the start request, and the audit trail with the starting correlation id
    again = requests.post(f"{base}/agents/{agent_id}/runs", timeout=10,
                          json={"input": {"question": "Which country brings the most paid revenue?"}},
                          headers=_h(platform, **{"Idempotency-Key": "it-1"}))
    assert again.status_code == 202 and again.json()["id"] == run["id"]
    audit = requests.get(f"{base}/audit/events?action=agent_run.*", headers=_h(platform), timeout=10).json()
    mine = [e for e in audit["events"] if e["target"]["id"] == run["id"]]
    assert [e["action"] for e in mine] == ["agent_run.created", "agent_run.finished"]
    assert {e["correlation_id"] for e in mine} == {"it-agent-run-0001"}


def test_problem_answers_over_http(platform: RunningPlatform) -> None:
    base = platform.urls["platform"]
    agent_id = platform.demo["agent_id"]
    r = requests.post(f"{base}/agents/{agent_id}/runs", json={"input": [1]}, headers=_h(platform), timeout=10)
    assert r.status_code == 400 and r.headers["Content-Type"] == "application/problem+json"
    r = requests.post(f"{base}/agents/{agent_id}/runs", json={"input": {}}, headers=_h(platform), timeout=10)
    assert r.status_code == 400 and r.json()["code"] == "missing_input"  # the plan names input.question
    r = requests.post(f"{base}/agents/agt_01J0000000000000000000000Z/runs", json={"input": {}},
                      headers=_h(platform), timeout=10)
    assert r.status_code == 404 and r.json()["code"] == "not_found"
