"""The agents pages against the real agents API of the local platform: the demo agent's definition,
a run started with input from the page, its steps arriving live until it completes, the past runs, and
a queued run cancelled from its page, and a run cancelled while a step is in progress.
(Before the API existed these pages were tested against a stand-in; that test is gone.)"""
from __future__ import annotations

import os
import re
from typing import Any

import pytest
import requests

from infra.local_run import HOLD_AGENT_STEPS
from tests.integration.sessions import mfa_member
from tests.integration.webapp.browser import AXE, CHROMIUM, check_page, ready, sign_in_at

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif((not os.path.exists(CHROMIUM) or not AXE.exists()) and not os.environ.get("CI"),
                                 reason="run `make system-deps` (Debian chromium, npm axe-core)")]


def test_start_an_agent_run_and_watch_it_complete(platform: Any, browser: Any) -> None:
    user = mfa_member(platform)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sign_in_at(page, platform.urls, user, "/agents")
    page.wait_for_selector("a:has-text('Demo order analyst')")
    check_page(page, "agents")
    page.click("a:has-text('New agent')")
    page.wait_for_selector("fieldset legend:has-text('What it may do')")
    # the shared local platform serves no tool-capable model: the builder says so and where to connect one
    assert not _tool_models(platform)
    notice = page.locator("#agent-no-tool-model")
    assert "No tool-capable model is connected" in notice.text_content()
    assert notice.locator("a:has-text('Models page')").get_attribute("href") == "/models"
    check_page(page, "agent-new")
    page.go_back()
    ready(page)
    page.click("a:has-text('Demo order analyst')")
    page.wait_for_selector("#start-run")
    assert page.is_visible("#run-question")  # the plan's {{input.question}} is asked in words, not JSON
    check_page(page, "agent")
    page.fill("#run-question", "Which country brings the most paid revenue?")
    page.click("#start-run")
    page.wait_for_url("**/runs/run_*")
    page.wait_for_selector("#run-status .badge:text-is('completed')", timeout=90000)
    assert page.locator("#run-steps li[data-status=completed]").count() == 4
    # named for people: the agent and when the run started, not its id
    assert page.text_content("#run-name").startswith("Demo order analyst · ")
    assert "run_" not in page.text_content("h1")
    # each step folds: closed, its summary names it; opened, its input and output show
    first = page.locator("#run-steps li details.step").first
    assert page.locator("#run-steps li details.step > summary").count() == 4
    assert first.get_attribute("open") is None and not first.locator("pre").is_visible()
    first.locator("summary").click()
    assert first.locator("pre").is_visible()
    # the extractive answer is a Markdown list: shown as a sanitised HTML list, no "- " left as text
    page.wait_for_selector("#run-answer ul li")
    answer = page.text_content("#run-answer").strip()
    assert answer and "\n- " not in answer and page.locator("#run-answer script").count() == 0
    assert page.locator("#cancel-run").count() == 0  # a finished run offers no cancel
    check_page(page, "agent-run")
    page.go_back()
    ready(page)
    page.wait_for_selector("table caption:has-text('Runs')")
    assert page.locator("tbody .badge:text-is('completed')").count() >= 1

    # cancel from the run page: the worker pool is kept busy by delaying the run queue's deliveries, so
    # the run is still queued when Cancel is pressed; it ends cancelled and offers no cancel any more
    sqs = platform.aws("sqs")
    queue = next(u for u in sqs.list_queues()["QueueUrls"] if u.endswith("-agent-runs"))
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"DelaySeconds": "60"})
    try:
        # a read of the run sent before Cancel is answered after it, as it may be on a slow network: the
        # page's first read passes, its event stream ends at once, and its next read is held back
        held: list[Any] = []
        reads = _RunReads(held)
        page.route(reads.matches, reads.handle)
        page.fill("#run-question", "Which country brings the most paid revenue?")
        page.click("#start-run")
        page.wait_for_url("**/runs/run_*")
        page.wait_for_selector("#run-status .badge:text-is('queued')")
        for _ in range(200):
            if held:
                break
            page.wait_for_timeout(50)
        assert held, "the page did not read the run again"
        page.click("#cancel-run")
        page.wait_for_selector("#run-status .badge:text-is('cancelled')")
        for route, answer in held:
            route.fulfill(response=answer)  # the stale 'queued' arrives now
        page.unroute(reads.matches, reads.handle)
        page.wait_for_timeout(500)
        assert page.text_content("#run-status .badge") == "cancelled"  # the page never steps back
        assert "Cancelled before it started" in page.text_content("#run-status")
        page.wait_for_selector("#cancel-run", state="detached")
        check_page(page)
        page.reload()
        ready(page)
        assert page.text_content("#run-status .badge") == "cancelled"  # as the API keeps it
    finally:
        sqs.set_queue_attributes(QueueUrl=queue, Attributes={"DelaySeconds": "0"})
    context.close()


def _tool_models(platform: Any) -> list[str]:
    """The demo workspace's models that call tools, as GET /v1/models says (``capabilities.tool_use``)."""
    ws = platform.demo["workspaces"]["us-east-1"]
    r = requests.get(platform.regions["us-east-1"]["platform"] + "/models", timeout=30,
                     headers={"Authorization": f"Bearer {ws['api_token']}"})
    assert r.status_code == 200, r.text
    return [m["id"] for m in r.json()["items"] if m["capabilities"]["tool_use"]]


class _RunReads:
    """Routes the run page's API calls: the first read of the run passes, event streams answer empty at
    once, and later reads are fetched but held (route, answer) until the test lets them through."""

    def __init__(self, held: list[Any]) -> None:
        self.held, self.reads = held, 0

    @staticmethod
    def matches(url: str) -> bool:
        return bool(re.search(r"/api/platform/.*/runs/run_[^/]+(/events)?$", url.split("?")[0]))

    def handle(self, route: Any) -> None:
        if route.request.url.split("?")[0].endswith("/events"):
            route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body="")
            return
        self.reads += 1
        if self.reads == 1:
            route.continue_()
        else:
            self.held.append((route, route.fetch()))


def test_cancel_a_run_in_progress(platform: Any, browser: Any) -> None:
    """The local worker holds a run after its first step while the test's hold file exists
    (``infra/local_run.py``, ``HOLD_AGENT_STEPS``), so the run is deterministically in progress when Cancel
    is pressed (by keyboard). The API accepts the request (202), the page says the run stops after the
    current step; once the worker moves on, its checkpoint finishes the run ``cancelled`` before step 2,
    and no further step starts."""
    user = mfa_member(platform)
    hold = platform.state_dir / HOLD_AGENT_STEPS
    context = browser.new_context(viewport={"width": 375, "height": 800})
    page = context.new_page()
    sign_in_at(page, platform.urls, user, "/agents")
    page.click("a:has-text('Demo order analyst')")
    page.wait_for_selector("#start-run")
    hold.touch()
    try:
        page.fill("#run-question", "Which country brings the most paid revenue?")
        page.click("#start-run")
        page.wait_for_url("**/runs/run_*")
        page.wait_for_selector("#run-steps li[data-status=completed]", timeout=60000)  # step 1 done, step 2 held
        assert page.text_content("#run-status .badge") == "in_progress"
        page.focus("#cancel-run")
        page.keyboard.press("Enter")
        page.wait_for_selector(".action-result:has-text('Stopping after the current step')")
        assert page.text_content("#run-status .badge") == "in_progress"  # asked to stop, not stopped yet
        assert page.text_content("#run-usage") == " · 1 step done so far"
        assert page.evaluate("document.documentElement.scrollWidth") <= 375  # the long run id wraps
        check_page(page, "agent-run-cancelling")
    finally:
        hold.unlink(missing_ok=True)
    page.wait_for_selector("#run-status .badge:text-is('cancelled')", timeout=60000)
    assert "Cancelled on request before step 2" in page.text_content("#run-status")
    page.wait_for_selector("#cancel-run", state="detached")
    assert page.locator("#run-steps li").count() == 1  # no further step ran
    check_page(page)
    page.reload()
    ready(page)
    assert page.text_content("#run-status .badge") == "cancelled"  # as the API keeps it
    assert page.locator("#run-steps li").count() == 1
    assert page.locator("#run-steps li[data-status=completed]").count() == 1
    context.close()
