"""The agents pages against the real agents API of the local platform: the demo agent's definition,
a run started with input from the page, its steps arriving live until it completes, the past runs, and
a queued run cancelled from its page.
(Before the API existed these pages were tested against a stand-in; that test is gone.)"""
from __future__ import annotations

import os
from typing import Any

import pytest

from tests.integration.webapp.browser import AXE, CHROMIUM, check_page, ready, sign_in_with_password_and_totp

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif((not os.path.exists(CHROMIUM) or not AXE.exists()) and not os.environ.get("CI"),
                                 reason="run `make system-deps` (Debian chromium, npm axe-core)")]


def test_start_an_agent_run_and_watch_it_complete(platform: Any, browser: Any) -> None:
    app, auth, demo = platform.urls["app"], platform.urls["identity"], platform.demo
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(app + "/agents")
    sign_in_with_password_and_totp(page, auth, demo["email"], demo["password"], demo["totp_secret"])
    page.wait_for_url(app + "/agents")
    ready(page)
    page.wait_for_selector("a:has-text('Demo order analyst')")
    check_page(page, "agents")
    page.click("a:has-text('New agent')")
    page.wait_for_selector("fieldset legend:has-text('Allowed tools')")
    check_page(page, "agent-new")
    page.go_back()
    ready(page)
    page.click("a:has-text('Demo order analyst')")
    page.wait_for_selector("#start-run")
    assert '"question"' in page.input_value("#run-input")  # the plan's {{input.question}} is offered
    check_page(page, "agent")
    page.fill("#run-input", '{"question": "Which country brings the most paid revenue?"}')
    page.click("#start-run")
    page.wait_for_url("**/runs/run_*")
    page.wait_for_selector("#run-status .badge:text-is('completed')", timeout=90000)
    assert page.locator("#run-steps li[data-status=completed]").count() == 4
    assert page.text_content("#run-answer").strip()
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
        page.fill("#run-input", '{"question": "Which country brings the most paid revenue?"}')
        page.click("#start-run")
        page.wait_for_url("**/runs/run_*")
        page.wait_for_selector("#run-status .badge:text-is('queued')")
        page.click("#cancel-run")
        page.wait_for_selector("#run-status .badge:text-is('cancelled')")
        assert "Cancelled before it started" in page.text_content("#run-status")
        page.wait_for_selector("#cancel-run", state="detached")
        check_page(page)
        page.reload()
        ready(page)
        assert page.text_content("#run-status .badge") == "cancelled"  # as the API keeps it
    finally:
        sqs.set_queue_attributes(QueueUrl=queue, Attributes={"DelaySeconds": "0"})
    context.close()
