"""The agent builder's datasets, against the real agents and catalog APIs of the local platform: an
Admin of the demo workspace builds an agent without JSON, ticks one of the workspace's datasets, saves,
reloads the editor and sees exactly that dataset ticked; the agent's page names it; the builder fits a 375 px screen and
passes axe-core."""
from __future__ import annotations

import os
from typing import Any

import pytest

from tests.integration.sessions import mfa_member
from tests.integration.webapp.browser import AXE, CHROMIUM, check_page, ready, sign_in_at

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif((not os.path.exists(CHROMIUM) or not AXE.exists()) and not os.environ.get("CI"),
                                 reason="run `make system-deps` (Debian chromium, npm axe-core)")]


def ticked(page: Any) -> list[str]:
    return page.eval_on_selector_all("#agent-datasets input[name=datasets]",
                                     "els => els.filter(e => e.checked).map(e => e.labels[0].textContent)")


def test_tick_a_dataset_save_reload_and_see_it_ticked(platform: Any, browser: Any) -> None:
    user = mfa_member(platform)
    context = browser.new_context(viewport={"width": 375, "height": 800})
    page = context.new_page()
    sign_in_at(page, platform.urls, user, "/agents/new")
    page.wait_for_selector("fieldset legend:has-text('Datasets it may read')")
    names = page.eval_on_selector_all("#agent-datasets input[name=datasets]", "els => els.map(e => e.labels[0].textContent)")
    assert "orders" in names and "customers" in names, names
    assert ticked(page) == []  # a new agent: none ticked (every dataset the runner may read)
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    heights = page.eval_on_selector_all("#agent-datasets label", "els => els.map(e => e.getBoundingClientRect().height)")
    assert max(heights) < 2 * min(heights) + 1 and max(heights) < 40, heights  # each name on one line, unbroken
    check_page(page, "agent-new-datasets-375")

    page.fill("input[name=name]", "Orders only")
    page.get_by_label("orders", exact=True).check()
    page.click("#save-agent")
    page.wait_for_url("**/agents/agt_*")
    ready(page)
    assert page.eval_on_selector_all("#agent-dataset-list li", "els => els.map(e => e.textContent)") == ["orders"]
    agent_url = page.url

    page.goto(agent_url + "/edit")
    ready(page)
    page.reload()
    ready(page)
    page.wait_for_selector("#agent-datasets")
    assert ticked(page) == ["orders"]
    assert page.locator("textarea, input").evaluate_all(
        "els => els.filter(e => e.value.trim().startsWith('{') || e.value.trim().startsWith('[')).length") == 0  # no JSON
    check_page(page)

    # unticking every dataset saves an empty list: the agent reads what its runner may read
    page.get_by_label("orders", exact=True).uncheck()
    page.click("#save-agent")
    page.wait_for_url(agent_url)
    ready(page)
    assert "every dataset the person running it may read" in page.text_content("main")
    context.close()
