"""The web app in a real browser against the real local platform (`python -m infra.local_run`, the
stack `make run` starts): Debian's Chromium through Playwright, every page checked with axe-core (no
serious or critical violation) under the app's strict CSP, and a screenshot of each main page saved
(build/screenshots/; `make screenshots` refreshes docs/screenshots/).

One journey, in order: a deep link survives sign-in (password + authenticator code) -> create an EU
workspace -> switch workspaces -> invite a teammate -> the teammate signs up from the e-mailed link and
accepts -> a query shows masked columns -> the dataset page draws lineage as a graph -> the audit
trail is exported and verified -> 375 px viewport -> visible keyboard focus -> unknown addresses get
the 404 page -> sign-out ends the identity session too.
"""
from __future__ import annotations

import os
import re
import time
import uuid
from typing import Any

import pytest
import requests

from chalicelib.core.tenancy import SCOPE_CACHE_SECONDS
from infra.local_run import run_now_file
from tests.integration.sessions import mfa_member
from tests.integration.webapp.browser import (
    AXE,
    CHROMIUM,
    SHOTS,
    axe_violations,
    check_page,
    csp_watch,
    read_mail,
    ready,
    sign_in_at,
    sign_in_with_emailed_code,
    sign_in_with_password_and_totp,
)

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif((not os.path.exists(CHROMIUM) or not AXE.exists()) and not os.environ.get("CI"),
                                 reason="run `make system-deps` (Debian chromium, npm axe-core)")]
TEAMMATE = "teammate@example.com"


def _goto(page: Any, url: str) -> None:
    page.goto(url)
    ready(page)


def test_journey(platform: Any, browser: Any) -> None:
    app, auth = platform.urls["app"], platform.urls["identity"]
    demo, user = platform.demo, mfa_member(platform)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    refused = csp_watch(page)

    # a signed-out deep link goes to the hosted sign-in and comes back to the same address
    sign_in_at(page, platform.urls, user, "/audit?action=workspace.created")
    assert page.text_content("#who") == user["email"]
    page.wait_for_selector("table caption:has-text('Audit events')")
    assert page.locator("tbody tr").count() >= 1 and "workspace.created" in page.text_content("tbody")
    check_page(page)

    _goto(page, app + "/")
    assert page.text_content("#ws-name") == "Demo Workspace"
    check_page(page, "overview")

    # create an EU workspace: the br-south explanation appears when it is chosen
    _goto(page, app + "/workspaces/new")
    page.select_option("select[name=residency]", "br-south")
    assert page.is_visible("#br-south-note")
    check_page(page, "create-workspace")
    page.fill("input[name=name]", "Research EU")
    page.select_option("select[name=residency]", "eu-central")
    page.click("button[type=submit]")
    page.wait_for_selector("#ws-name:text-is('Research EU')")
    assert "eu-central" in page.text_content("#ws-residency")
    options = page.locator("#ws-switch option").all_text_contents()
    assert any("Demo Workspace" in o and "us-east" in o for o in options), options
    assert any("Research EU" in o and "eu-central" in o for o in options), options

    # switch to the demo workspace and back (token exchange through the app's server)
    page.select_option("#ws-switch", label=next(o for o in options if "Demo Workspace" in o))
    page.wait_for_selector("#ws-name:text-is('Demo Workspace')")
    page.select_option("#ws-switch", label=next(o for o in options if "Research EU" in o))
    page.wait_for_selector("#ws-name:text-is('Research EU')")
    eu_workspace = page.eval_on_selector("#ws-switch", "s => s.value")

    # invite a teammate into the EU workspace
    _goto(page, app + "/members")
    sent = time.time()
    page.fill("input[name=email]", TEAMMATE)
    page.select_option("select[name=role]", "member")
    page.click("button:has-text('Invite')")
    page.wait_for_selector("#invite-sent")
    page.wait_for_selector(f".invite-email:has-text('{TEAMMATE}')")
    check_page(page, "members")

    # the teammate (a new user) opens the e-mailed link, signs up with an e-mailed code, accepts
    link = read_mail(platform.outbox, TEAMMATE, r"(https?://\S+/invitations/accept\?\S+)", sent)
    assert link.startswith(app + "/invitations/accept?") and eu_workspace in link
    mate = browser.new_context(viewport={"width": 1280, "height": 900})
    mpage = mate.new_page()
    mpage.goto(link)
    sign_in_with_emailed_code(mpage, auth, platform.outbox, TEAMMATE)
    mpage.wait_for_url(link)
    ready(mpage)
    assert mpage.text_content("#accept-as") == TEAMMATE
    check_page(mpage, "accept-invitation")
    mpage.click("#accept")
    mpage.wait_for_selector("#ws-name:text-is('Research EU')")
    assert "member" in mpage.text_content("#me-roles")
    # a Member sees no admin page in the navigation, and one opened by address says who it is for
    assert mpage.locator("#nav a[href='/members'], #nav a[href='/settings']").count() == 0
    for admin_page in ("/members", "/settings"):
        _goto(mpage, app + admin_page)
        assert mpage.text_content("#role-refused") == "Admins only"
        assert "member" in mpage.text_content("#main") and "Forbidden" not in mpage.text_content("#main")
    check_page(mpage, "admins-only")
    mate.close()

    # the Admin requires MFA in the EU workspace; the teammate's one-factor sign-in (e-mailed code) is
    # refused, and the app says why and what to do instead of looping
    _goto(page, app + "/settings")
    page.check("input[name=enforce_mfa]")
    page.click("button:has-text('Save') >> nth=0")
    page.wait_for_selector("p.ok:has-text('Saved.')")
    saved_at = time.monotonic()  # other processes read the workspace within SCOPE_CACHE_SECONDS of it
    # cross-region DR of an EU workspace asks for the acknowledgement first; no copy exists yet
    assert page.get_attribute("#dr-lag", "data-replicated") == "false"
    page.select_option("select[name=replication]", "cross-region-dr")
    page.click("button:has-text('Save replication')")
    page.wait_for_selector("#eu-ack[open]")
    page.click("#ack-confirm")  # not acknowledged: the dialog stays open
    assert page.is_visible("#eu-ack") and page.evaluate("document.activeElement.id") == "ack-leaves"
    page.check("#ack-leaves")
    page.click("#ack-confirm")
    page.wait_for_selector("#replication-saved:has-text('cross-region-dr')")
    # the workspace read now reports the DR lag, and no copy pass has run yet
    assert page.get_attribute("#dr-lag", "data-replicated") == "false"
    assert "first copy" in page.text_content("#dr-lag") and "pending" in page.text_content("#dr-lag")
    # the sign-in and authorization steps both see the setting once that bound has passed (before it, the
    # sign-in step may still see it off, and only the authorization step refuse)
    time.sleep(max(0.0, saved_at + SCOPE_CACHE_SECONDS + 0.5 - time.monotonic()))
    mate = browser.new_context(viewport={"width": 1280, "height": 900})
    mpage = mate.new_page()
    mpage.goto(app + "/audit")
    sign_in_with_emailed_code(mpage, auth, platform.outbox, TEAMMATE)
    # the identity service stops there with its own page (the app's /callback page covers an
    # access_denied refusal that names MFA: tests/functional/webapp/test_routes.py)
    mpage.wait_for_url(re.compile(re.escape(auth) + r"/signin/mfa-required\?"))
    assert "requires multi-factor authentication" in mpage.text_content("#mfa-reason")
    assert mpage.get_attribute("#open-settings", "href") == "/account"
    assert "prompt=login" in mpage.get_attribute("#sign-in-again", "href")
    assert not axe_violations(mpage)
    mpage.screenshot(path=str(SHOTS / "signin-mfa-required.png"), full_page=True)
    mate.close()

    # back as the Admin: the demo workspace's data, a query with masked columns
    options = page.locator("#ws-switch option").all_text_contents()
    page.select_option("#ws-switch", label=next(o for o in options if "Demo Workspace" in o))
    page.wait_for_selector("#ws-name:text-is('Demo Workspace')")
    _goto(page, app + "/knowledge/query")
    page.fill("#sql", "SELECT customer_id, full_name, email, phone, city FROM customers ORDER BY customer_id LIMIT 5")
    page.click("#run-query")
    page.wait_for_selector("#result-table")
    masked = page.locator("td.masked[data-policy=MASK]").all_text_contents()
    assert masked and all("*" in cell for cell in masked), masked
    assert page.locator("td.masked[data-policy=HASH]").count() == 5
    assert "email" in page.text_content("#masked-note")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280  # wide results scroll inside their box
    check_page(page, "query-masked")

    # a grounded question: the answer streams in, a citation opens its passage and its record
    _goto(page, app + "/chat")
    page.wait_for_selector("#models li")
    page.fill("#prompt", "Which customers live in Lisbon?")
    page.click("#send")
    page.wait_for_selector("#messages li.assistant .citation", timeout=60000)
    page.wait_for_url(re.compile(re.escape(app) + r"/chat/chat_\w+"))
    chat_link = f".chat-list a[href='/chat/{page.url.rsplit('/', 1)[-1]}']"
    assert "Lisbon" in page.text_content("#messages li.assistant .answer")
    first = page.locator("#messages li.assistant .citation").first
    first.locator("summary").click()
    assert "Lisbon" in first.locator("blockquote").text_content() and first.locator(".badge.good").count() == 1
    assert page.locator("details.routing").count() == 1
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    check_page(page, "chat")
    first.locator("a").click()
    page.wait_for_selector("svg.lineage")
    # the conversation list deletes this conversation (the shared stack may hold other tests' chats)
    _goto(page, app + "/chat")
    page.wait_for_selector(chat_link)
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(".chat-list li", has=page.locator(chat_link.removeprefix(".chat-list "))).locator(
        "button:has-text('Delete')").click()
    page.wait_for_selector(chat_link, state="detached")

    # catalog search -> dataset page with the lineage graph
    _goto(page, app + "/knowledge?q=customers")
    page.wait_for_selector("a:has-text('customers')")
    check_page(page, "catalog")
    page.click("a:has-text('customers')")
    page.wait_for_selector("svg.lineage g.node.root")
    assert page.locator("svg.lineage .node").count() >= 2 and page.locator("svg.lineage path.edge").count() >= 1
    assert page.locator("select[aria-label='Policy of email']").input_value() == "MASK"
    check_page(page, "dataset")

    _goto(page, app + "/knowledge/connectors")
    page.wait_for_selector("table caption:has-text('Connectors')")
    check_page(page, "connectors")
    page.click("table a >> nth=0")
    page.wait_for_selector("#sync-now")
    # the history comes from GET /v1/connectors/{id}/syncs: the demo seed's sync is already there
    page.wait_for_selector("#sync-history li[data-sync]:not([data-sync=''])")
    before = page.locator("#sync-history li[data-sync]").count()
    assert before >= 1 and page.locator("#sync-history li[data-status=SUCCEEDED]").count() >= 1
    page.click("#sync-now")
    page.wait_for_selector("#sync-result", timeout=60000)  # followed live: queued -> running -> succeeded
    assert "Sync succeeded" in page.text_content("#sync-result"), page.text_content("#sync-result")
    newest = page.locator("#sync-history li").first
    assert newest.get_attribute("data-status") == "SUCCEEDED" and "rows read" in newest.text_content()
    assert page.locator("#sync-history li[data-sync]").count() == before + 1
    check_page(page, "connector")

    # a sync that fails says why: the source bucket is removed after the connector was created
    bucket = f"webapp-src-{uuid.uuid4().hex[:10]}"
    s3 = platform.source_aws("s3")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="in/a.jsonl", Body=b'{"id": 1}\n')
    made = requests.post(platform.urls["gateway"] + "/v1/connectors", timeout=30,
                         headers={"Authorization": f"Bearer {demo['api_token']}"},
                         json={"name": f"Gone {bucket}", "kind": "s3", "config": {
                             "role_arn": "arn:aws:iam::111122223333:role/gateway-reader", "bucket": bucket, "prefix": "in/"}})
    assert made.status_code == 201, made.text
    s3.delete_object(Bucket=bucket, Key="in/a.jsonl")
    s3.delete_bucket(Bucket=bucket)
    _goto(page, app + f"/knowledge/connectors/{made.json()['id']}")
    page.wait_for_selector("#sync-history .empty-item")  # no sync yet
    page.click("#sync-now")
    page.wait_for_selector("#sync-result", timeout=90000)
    failed = page.locator("#sync-history li").first
    assert failed.get_attribute("data-status") == "FAILED", failed.text_content()
    reason = failed.locator(".sync-error").text_content()
    assert reason.strip().startswith("· failed:") and len(reason) > 12, reason
    assert "Sync failed" in page.text_content("#sync-result")

    # the audit trail exported and verified, with a download link
    _goto(page, app + "/audit")
    check_page(page, "audit")
    page.click("#export")
    page.wait_for_selector("#export-result", timeout=30000)
    assert "Verified" in page.text_content("#export-result")
    assert page.get_attribute("#export-download", "href").startswith("http")
    check_page(page, "audit-export-verified")

    _goto(page, app + "/settings")
    page.wait_for_selector("table caption:has-text('Support access grants'), .empty:has-text('No support access')")
    # an SSO connection: created unverified, with what to publish; checking before publishing says so
    domain = f"sso{int(time.time())}.example.com"
    page.wait_for_selector("#sso-kind option[value=open_source_identity_server]", state="attached")
    page.select_option("#sso-kind", "open_source_identity_server")
    page.fill("#sso-email-domain", domain)
    page.fill("#sso-issuer", f"https://idp.{domain}/realms/main")
    page.fill("#sso-client-id", "aiplat-app")
    page.fill("#sso-client-secret", "client-secret-value")
    page.click("#sso-create")
    page.wait_for_selector("#sso-created")
    row = page.locator("tr", has=page.locator(f".sso-domain:text-is('{domain}')"))
    row.locator("[data-verified=false]").wait_for()
    proof = row.locator(".sso-verify").text_content()
    assert f"_aiplat-verification.{domain}" in proof and "aiplat-domain-verification=" in proof  # what to publish
    assert page.input_value("#sso-client-secret") == ""
    row.locator("button:has-text('Check now')").click()
    row.locator(".problem:has-text('domain_not_verified')").wait_for(timeout=30000)
    assert row.locator("[data-verified=false]").count() == 1
    check_page(page, "settings")

    # keyboard: on a freshly loaded page the skip link is the first stop and its focus is visible
    _goto(page, app + "/settings")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", ""), outline

    # 375 px wide: nothing overflows sideways
    page.set_viewport_size({"width": 375, "height": 800})
    for path in ("/", "/knowledge/query", "/members", "/audit"):
        _goto(page, app + path)
        assert page.evaluate("document.documentElement.scrollWidth") <= 375, path
    check_page(page, "mobile-audit")
    page.set_viewport_size({"width": 1280, "height": 900})

    # a start that fails (here: the shell came without the workspace list, as when the platform did not
    # answer its server in time, and the page's own call is lost on the network) still ends in a ready
    # state: an error page with the reason and a way to retry, never an endless "Loading…"
    def without_list(route: Any) -> None:
        original = route.fetch()
        body = re.sub(r' data-prefetched="[^"]*"', "", original.text())
        route.fulfill(response=original, body=body)

    frame_call = lambda url: "/api/platform/v1/workspaces?" in url  # noqa: E731
    page.route(app + "/members", without_list)
    page.route(frame_call, lambda route: route.abort("connectionreset"))
    page.goto(app + "/members")
    page.wait_for_selector("body[data-ready=true][data-state=error]")
    assert page.text_content("h1") == "The app could not start"
    assert "fetch" in page.text_content("#main [role=alert]").lower()  # the browser's reason: the call failed
    assert page.get_attribute("#main a.button", "href") == "/members"
    check_page(page)
    page.unroute(frame_call)
    page.unroute(app + "/members")

    # unknown addresses, however deep, get the 404 page (not a raw 403)
    for path in ("/deep" * 20, "/nope", "/a/b/c/d/e", "/a/b/c/d/e/f/g/h/i/j"):  # axe runs on the last, unsandboxed
        resp = page.goto(app + path)
        assert resp.status == 404 and page.text_content("h1") == "Page not found", path
    check_page(page, "not-found")

    # two tabs find the access token expired at the same moment: one refreshes, the other waits and
    # reuses the renewed session (presenting the rotating refresh token twice would revoke the grant)
    other = context.new_page()
    _goto(other, app + "/")
    _goto(page, app + "/")
    context.clear_cookies(name="app_at")
    at = page.evaluate("Date.now()") + 800
    for tab in (page, other):
        tab.evaluate("""at => { window.__call = new Promise((done) => setTimeout(() => import("/static/api.js")
            .then((api) => api.platform("/v1/me")).then(() => done("ok"), (err) => done(String(err.status))), at - Date.now())); }""", at)
    assert [page.evaluate("window.__call"), other.evaluate("window.__call")] == ["ok", "ok"]
    other.close()
    _goto(page, app + "/")  # still signed in: no sign-in redirect
    assert page.text_content("#who") == user["email"]

    # sign out: the app and the identity service's session end; the next visit asks to sign in
    _goto(page, app + "/")
    page.click("#signout")
    page.wait_for_url(app + "/signed-out?state=*")
    check_page(page, "signed-out")
    page.goto(app + "/")
    page.wait_for_url(re.compile(re.escape(auth) + r"/signin\?"))
    assert not refused, refused
    context.close()


def test_the_first_page_renders_from_the_shells_workspace_list(platform: Any, browser: Any) -> None:
    """A page opened by address asks the API nothing for its frame: the shell carries the workspace list
    (``webapp/prefetch.py``) and the overview finds its workspace there; an overview reached later by a link
    asks the API, so it shows what changed since."""
    app = platform.urls["app"]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sign_in_at(page, platform.urls, platform.demo, "/settings")
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/api/platform/v1/workspaces" in r.url else None)
    _goto(page, app + "/")
    assert page.text_content("#ws-name") == "Demo Workspace"
    assert "Demo Workspace" in page.text_content("#ws-switch")
    assert asked == [], asked
    page.click("#nav a[href='/settings']")
    page.wait_for_selector("#main[aria-busy=false] h1:text-is('Settings')")
    asked.clear()  # the settings page reads the workspace itself
    page.click("a.brand")
    page.wait_for_selector("#ws-name:text-is('Demo Workspace')")
    assert [url for url in asked if re.search(r"/api/platform/v1/workspaces/ws_[A-Za-z0-9]+$", url)], asked
    context.close()


def test_an_address_deeper_than_any_route_shows_the_404_page(platform: Any, browser: Any) -> None:
    """Deeper than ``pages.MAX_DEPTH`` segments no app route matches; deployed, API Gateway answers with
    the app group's gateway response, which the local server reproduces: the same page under the same
    quote-free CSP (``sandbox``, own origin only). The page is styled, axe-clean, keyboard-usable at
    375 px, and the browser reports no CSP refusal."""
    from chalicelib.webapp.pages import MAX_DEPTH, quote_free_csp

    app = platform.urls["app"]
    context = browser.new_context(viewport={"width": 375, "height": 740})
    page = context.new_page()
    refused = csp_watch(page)
    resp = page.goto(app + "/deep" * (MAX_DEPTH + 4) + "?q=1")
    assert resp.status == 404
    assert resp.headers["content-security-policy"] == quote_free_csp([app])
    assert "'" not in resp.headers["content-security-policy"]
    assert resp.headers["x-frame-options"] == "DENY"
    assert resp.headers["content-type"].startswith("text/html")
    assert page.text_content("h1") == "Page not found"
    # the stylesheet applies (the CSP admits the app's own origin): the overview link is a styled button
    page.wait_for_load_state("load")
    assert page.eval_on_selector("a.button", "a => getComputedStyle(a).textDecorationLine") == "none"
    assert page.evaluate("document.documentElement.scrollWidth") <= 375  # no sideways scrolling
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "AI Platform"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Go to the overview"
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"  # visible focus
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(re.escape(platform.urls["identity"]) + r"/signin\?"))  # the overview asks to sign in

    # axe-core needs timers, which a sandboxed page without allow-scripts never runs: the same response
    # is checked with only the ``sandbox`` directive taken off (the same sources, markup and stylesheet)
    def unsandboxed(route: Any) -> None:
        original = route.fetch()
        headers = {**original.headers, "content-security-policy":
                   original.headers["content-security-policy"].removeprefix("sandbox; ")}
        route.fulfill(response=original, headers=headers)

    page.route("**/deep/deep/**", unsandboxed)
    page.goto(app + "/deep" * (MAX_DEPTH + 4))
    assert page.text_content("h1") == "Page not found"
    check_page(page, "not-found-deep")
    assert not refused, refused
    context.close()


def test_dr_lag_after_a_real_replication_pass(platform: Any, browser: Any) -> None:
    """The Admin turns cross-region DR on for the demo EU workspace (with the acknowledgement), the EU
    region's scheduler runs one real replication pass against the local stack (asked through its
    ``run_now_file``), and Settings shows the copy: the checkpoint time and a lag within the RPO. Turning
    DR off again shows no copy."""
    app, demo = platform.urls["app"], platform.demo
    user = mfa_member(platform, workspaces=("us-east-1", "eu-central-1"))
    context = browser.new_context(viewport={"width": 375, "height": 800})
    page = context.new_page()
    refused = csp_watch(page)
    sign_in_at(page, platform.urls, user, "/settings")
    options = page.locator("#ws-switch option").all_text_contents()
    page.select_option("#ws-switch", label=next(o for o in options if "Demo Workspace EU" in o))
    page.wait_for_selector("#ws-name:text-is('Demo Workspace EU')")
    _goto(page, app + "/settings")
    assert page.get_attribute("#dr-lag", "data-replicated") == "false"
    page.select_option("select[name=replication]", "cross-region-dr")
    page.click("button:has-text('Save replication')")
    page.wait_for_selector("#eu-ack[open]")
    page.check("#ack-leaves")
    page.click("#ack-confirm")
    page.wait_for_selector("#replication-saved:has-text('cross-region-dr')")
    assert "first copy" in page.text_content("#dr-lag")

    asked = platform.state_dir / run_now_file("replicate_workspaces", "eu-central-1")
    asked.touch()
    deadline = time.monotonic() + 120
    while asked.exists() and time.monotonic() < deadline:  # removed by the scheduler when the pass ends
        time.sleep(0.5)
    assert not asked.exists(), "the EU region's scheduler did not run the replication pass"
    _goto(page, app + "/settings")
    page.wait_for_selector("#dr-lag[data-replicated=true]")
    shown = page.text_content("#dr-lag")
    assert "within the RPO" in shown
    assert "last copy" in shown
    assert "eu-west-1" in shown  # the EU workspace's declared secondary keeps the copy in the EU
    # the page shows the API's workspace read (fetched here through the app's own client)
    ws = page.evaluate("""id => import("/static/api.js").then((api) => api.platform(`/v1/workspaces/${id}`))""",
                       demo["eu_workspace_id"])
    assert ws["last_replicated_at"]
    assert ws["replication_secondary_region"] == "eu-west-1"
    assert ws["replication_lag_seconds"] < 900
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    check_page(page, "settings-dr")

    # DR off again (the copy is deleted by the next pass): no copy is shown
    page.select_option("select[name=replication]", "none")
    page.click("button:has-text('Save replication')")
    page.wait_for_selector("#dr-lag[data-replicated=false]")
    assert not refused, refused
    context.close()


@pytest.mark.parametrize("evil", ["/%09/evil.example", "/%09/%09evil.example/x", "/%0d%0a/evil.example"])
def test_a_sign_in_link_with_a_foreign_return_path_lands_on_the_app(platform: Any, browser: Any, evil: str) -> None:
    """The open redirect, attacked in a real browser: Chromium strips a tab from ``/\\t/evil.example`` and
    reads ``//evil.example``, another host. The sign-in link with such a path (a tab, or CR/LF, which
    answered 500) signs the user in and lands on the app's home page, on the app's own origin."""
    app, auth = platform.urls["app"], platform.urls["identity"]
    user = mfa_member(platform)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    seen: list[str] = []
    page.on("request", lambda req: seen.append(req.url))
    resp = page.goto(app + "/session/signin?path=" + evil)
    assert resp is not None and resp.status < 500
    sign_in_with_password_and_totp(page, auth, user["email"], user["password"], user["totp_secret"])
    page.wait_for_url(app + "/")
    ready(page)
    assert page.text_content("#who") == user["email"]
    assert not [u for u in seen if "evil.example" in u.split("?", 1)[0]], seen
    context.close()
