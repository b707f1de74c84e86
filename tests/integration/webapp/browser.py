"""Browser helpers of the web app tests: Debian's Chromium through Playwright, axe-core (npm package in
``tests/integration/peers/axe-core``, evaluated through DevTools so the page's strict CSP stays on),
screenshots, and the hosted sign-in steps.

Screenshots go to ``build/screenshots/`` (untracked), so a test run leaves the tree clean;
``make screenshots`` sets ``SCREENSHOTS_DIR=docs/screenshots`` to refresh the ones docs/webapp.md shows."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from tests.integration.conftest import CHROMIUM  # noqa: F401 - re-exported for the web-app tests and bench
from tests.integration.sessions import fresh_totp

ROOT = Path(__file__).resolve().parents[3]
AXE = ROOT / "tests/integration/peers/axe-core/node_modules/axe-core/axe.min.js"
SHOTS = ROOT / os.environ.get("SCREENSHOTS_DIR", "build/screenshots")


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """Serious and critical axe-core violations of the page as it is now."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [{"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
            for v in result["violations"] if v["impact"] in ("serious", "critical")]


def check_page(page: Any, shot: str | None = None) -> None:
    """No serious/critical axe violation; then a screenshot named ``shot`` into ``SHOTS``."""
    page.wait_for_selector("#main[aria-busy=false], main.plain", timeout=15000)
    found = axe_violations(page)
    assert not found, json.dumps(found, indent=1)
    if shot:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{shot}.png"), full_page=True)


def csp_watch(page: Any) -> list[str]:
    """Collects Content-Security-Policy refusals the page reports (there must be none)."""
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    return refused


def read_mail(outbox: Path, to: str, pattern: str, after: float, timeout: float = 15) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        for path in sorted(outbox.glob("*.json")) if outbox.exists() else []:
            if path.stat().st_mtime < after - 1:
                continue
            msg = json.loads(path.read_text())
            if msg["to"] == to:
                found = re.search(pattern, msg["text"])
                if found:
                    return found.group(1) if found.groups() else found.group(0)
        time.sleep(0.2)
    raise AssertionError(f"no mail to {to} matching {pattern}")


def sign_in_with_password_and_totp(page: Any, auth: str, email: str, password: str, totp_secret: str) -> None:
    page.wait_for_url(re.compile(re.escape(auth) + r"/signin\?"))
    page.fill("#email", email)
    page.click("text=Continue")
    page.fill("#password", password)
    page.click("#password-form button[type=submit]")
    page.wait_for_selector("#step-mfa", state="visible")
    page.fill("#mfa-code", fresh_totp(totp_secret))
    page.click("#mfa-form button[type=submit]")


def sign_in_at(page: Any, urls: dict[str, str], user: dict[str, str], path: str = "/") -> None:
    """Open the app's ``path`` signed out, sign ``user`` (``email``, ``password``, ``totp_secret``) in on the
    hosted page, and wait until the app is back at ``path`` and ready."""
    page.goto(urls["app"] + path)
    sign_in_with_password_and_totp(page, urls["identity"], user["email"], user["password"], user["totp_secret"])
    page.wait_for_url(urls["app"] + path)
    ready(page)


def sign_in_with_emailed_code(page: Any, auth: str, outbox: Path, email: str) -> None:
    page.wait_for_url(re.compile(re.escape(auth) + r"/signin\?"))
    page.fill("#email", email)
    page.click("text=Continue")
    page.wait_for_selector("#step-methods", state="visible")
    sent = time.time()
    page.click("#method-code")
    page.wait_for_selector("#code", state="visible")
    page.fill("#code", read_mail(outbox, email, r"\b(\d{8})\b", sent))
    page.click("#code-form button[type=submit]")


def ready(page: Any) -> None:
    try:
        page.wait_for_selector("body[data-ready=true]", timeout=20000)
    except Exception as err:  # say where the app stopped (a sign-in redirect, an error page)
        raise AssertionError(f"app not ready at {page.url}: {page.text_content('body')[:300]!r}") from err
    if page.get_attribute("body", "data-state") == "error":  # the app started into its error page
        raise AssertionError(f"app could not start at {page.url}: {page.text_content('#main')[:300]!r}")
    page.wait_for_selector("#main[aria-busy=false]", timeout=20000)
