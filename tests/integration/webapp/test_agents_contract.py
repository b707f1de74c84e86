"""The agents pages against the agents API's documented contract (definitions, POST .../runs -> 202
queued, SSE run events with ids, GET run with steps, cancel).

STAND-IN BACKEND: the agents API is not on this deployment yet, so this test answers the browser's
``/api/platform/v1/agents...`` calls itself (Playwright request interception, in this file only), with
the shapes the API's issue documents. Everything else (sign-in, the shell, the forwarder for every
other call) is the real local platform. Replace this with the real API as soon as it lands; the
journey test in ``test_app_flows.py`` already shows the page's "not available yet" state when the real
API does not answer.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.webapp.browser import AXE, CHROMIUM, check_page, ready, sign_in_with_password_and_totp

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif((not os.path.exists(CHROMIUM) or not AXE.exists()) and not os.environ.get("CI"),
                                 reason="run `make system-deps` (Debian chromium, npm axe-core)")]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


class StandInAgents:
    """The documented agents contract, in memory, for this test only."""

    def __init__(self) -> None:
        self.agents = {"agt_01DEMO": {"id": "agt_01DEMO", "name": "Lisbon analyst", "instructions": "Answer from the catalog.",
                                      "model": "auto", "tools": ["knowledge_search", "query"], "limits": {"max_steps": 4},
                                      "created_at": "2026-11-22T10:00:00Z"}}
        self.runs: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []

    def handle(self, route: Any) -> None:
        req = route.request
        path = req.url.split("/api/platform", 1)[1].split("?", 1)[0]
        self.calls.append(f"{req.method} {path}")
        assert req.headers.get("x-requested-with") == "app"  # the page's CSRF header reaches the API path
        parts = path.strip("/").split("/")  # v1 agents {id} runs {run} [events|cancel]
        if parts == ["v1", "agents"]:
            return self.json(route, {"agents": list(self.agents.values()), "has_more": False, "next_cursor": None})
        agent = self.agents[parts[2]]
        if len(parts) == 3:
            return self.json(route, agent)
        if len(parts) == 4 and req.method == "POST":
            run_id = f"run_0{len(self.runs) + 1}"
            body = json.loads(req.post_data or "{}")
            self.runs[run_id] = {"id": run_id, "agent_id": agent["id"], "status": "queued", "input": body["input"],
                                 "steps": [], "output": None, "created_at": "2026-11-22T10:01:00Z"}
            return self.json(route, self.runs[run_id], 202)
        if len(parts) == 4:
            return self.json(route, {"runs": list(self.runs.values()), "has_more": False, "next_cursor": None})
        run = self.runs[parts[4]]
        if len(parts) == 6 and parts[5] == "events":
            run.update(status="completed", output="3 customers live in Lisbon.", finished_at="2026-11-22T10:01:05Z",
                       steps=[{"tool": "knowledge_search", "status": "completed", "input": {"q": "Lisbon"}, "output": {"hits": 3}},
                              {"tool": "query", "status": "completed", "input": {"sql": "SELECT count(*) FROM customers"},
                               "output": {"rows": [[3]]}}])
            stream = "".join(f"id: {i}\nevent: {e}\ndata: {json.dumps({'sequence': i, 'type': e})}\n\n"
                             for i, e in enumerate(["run.started", "step.completed", "step.completed", "run.completed"], 1))
            return route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=stream)
        if len(parts) == 6 and parts[5] == "cancel":
            run["status"] = "cancelled"
            return self.json(route, run)
        return self.json(route, run)

    @staticmethod
    def json(route: Any, body: Any, status: int = 200) -> None:
        route.fulfill(status=status, headers={"Content-Type": "application/json"}, body=json.dumps(body))


def test_agent_run_streams_to_completion_against_the_contract(platform: Any, browser: Any) -> None:
    app, auth, demo = platform.urls["app"], platform.urls["identity"], platform.demo
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(app + "/agents")
    sign_in_with_password_and_totp(page, auth, demo["email"], demo["password"], demo["totp_secret"])
    page.wait_for_url(app + "/agents")
    ready(page)
    real = page.text_content("#main")
    if "not available on this deployment yet" not in real:
        pytest.fail("The real agents API answers now: replace this stand-in test with one against it. " + real)

    stand_in = StandInAgents()
    page.route("**/api/platform/v1/agents**", stand_in.handle)
    page.goto(app + "/agents")
    ready(page)
    page.wait_for_selector("a:has-text('Lisbon analyst')")
    check_page(page, "agents")
    page.click("a:has-text('Lisbon analyst')")
    page.wait_for_selector("#start-run")
    page.fill("#run-input", '{"question": "How many customers live in Lisbon?"}')
    page.click("#start-run")
    page.wait_for_selector("#run-status .badge:has-text('completed')")
    assert page.locator("#run-steps li").count() == 2
    assert "3 customers live in Lisbon." in page.text_content("#run-output")
    check_page(page, "agent-run")
    assert "POST /v1/agents/agt_01DEMO/runs" in stand_in.calls and any(c.endswith("/events") for c in stand_in.calls)
    context.close()
