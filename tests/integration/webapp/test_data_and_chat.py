"""Bringing data in from the browser and a chat that reads well, in Debian's Chromium against the real
local platform, every page axe-clean under the app's CSP, screenshots at 1280 and 375 px:

- a documents connector is added from the page, several files are dropped at once: the text PDF is
  indexed, and a scanned PDF, an encrypted PDF, a zip bomb, a 0-byte file, a PDF named .txt and an
  oversized file each get their own clear message (the last four refused at upload, nothing of them
  stored; the two PDFs, which only a parser can tell, named by the sync that read them);
- a question whose answer needs the PDF: its citation [1] opens the passage with its page in the side
  panel; regenerate, rename, server-side search (the list shows only the matches); a streaming answer
  stopped with Stop;
- a model answer holding <script>, <img onerror>, javascript: links and raw HTML renders inert, its code
  blocks highlighted with a working copy button, its table a table;
- a long conversation keeps the composer in the window (1280 and 375 px); on a phone the conversation
  list is a drawer (closed at first, Escape and choosing a conversation close it);
- a preset saved over the API is offered for a new chat and starts it; the answer-mode choice shows only
  where the workspace allows general answers, and a general answer is labelled, with no grounding figure;
- an s3 connector added through the role-grant step (trust policy and ExternalId shown), "Check access";
- every page at 1280 and 375 px: no "null", no sideways scroll.
"""
from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.fixtures import documents
from tests.integration.sessions import mfa_member
from tests.integration.webapp.browser import (
    AXE,
    CHROMIUM,
    SHOTS,
    check_page,
    csp_watch,
    ready,
    sign_in_at,
)

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif((not os.path.exists(CHROMIUM) or not AXE.exists()) and not os.environ.get("CI"),
                                 reason="run `make system-deps` (Debian chromium, npm axe-core)")]
DONE = ("indexed", "refused", "failed")
TAG = uuid.uuid4().hex[:6]
PDF_PAGES = [f"Zephyr{TAG} handbook. Orders of zephyr gadgets ship within two days.",
             f"Refund requests for zephyr{TAG} gadgets are answered within nine business days."]


@pytest.fixture(scope="module")
def admin(platform: Any, browser: Any) -> Any:
    """An Admin of the demo workspace signed in once for the module (1280 px); tests reuse the page."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.refused = csp_watch(page)
    sign_in_at(page, platform.urls, mfa_member(platform), "/knowledge/connectors")
    yield page
    assert page.refused == [], page.refused
    context.close()


def _goto(page: Any, url: str) -> None:
    page.goto(url)
    ready(page)


def _api(page: Any, path: str) -> Any:
    return page.evaluate("""async (p) => (await fetch(p, {headers: {"X-Requested-With": "app"}})).json()""", path)


def _file(name: str, data: bytes, mime: str = "application/octet-stream") -> dict[str, Any]:
    return {"name": name, "mimeType": mime, "buffer": data}


def test_upload_documents_then_ask_with_cited_page(platform: Any, admin: Any) -> None:
    app, page = platform.urls["app"], admin
    _goto(page, app + "/knowledge/connectors")
    page.fill("input[name=name]", f"Policies {TAG}")
    page.click("#create-connector")
    page.wait_for_url(re.compile(re.escape(app) + r"/knowledge/connectors/conn_\w+"))
    ready(page)
    page.wait_for_selector("#dropzone")
    bad = {
        "scan.pdf": (documents.scanned_pdf(), "no text layer"),
        "locked.pdf": (documents.encrypted_pdf(), "password-protected"),
        "bomb.docx": (documents.zip_bomb(250), "zip bomb"),
        "empty.txt": (b"", "0 bytes"),
        "renamed.txt": (documents.pdf(["Renamed."]), "holds a PDF"),
        "huge.txt": (b"a" * (5 * 1024 * 1024 + 10), "limited to 5 MiB"),
    }
    files = [_file("policy.pdf", documents.pdf(PDF_PAGES), "application/pdf"),
             _file("notes.md", f"# Notes\n\nThe zephyr{TAG} office opens at 8.".encode(), "text/markdown"),
             *[_file(n, d) for n, (d, _) in bad.items()]]
    page.set_input_files("#upload-files", files)
    page.wait_for_function("""([n, done]) => { const l = [...document.querySelectorAll('#upload-list li.upload')];
        return l.length === n && l.every((x) => done.includes(x.dataset.state)); }""", arg=[len(files), list(DONE)],
                           timeout=90000)
    states = {li.get_attribute("data-file"): (li.get_attribute("data-state"), li.text_content())
              for li in page.query_selector_all("#upload-list li.upload")}
    assert states["policy.pdf"][0] == "indexed", states
    assert states["notes.md"][0] == "indexed", states
    for name, (_, words) in bad.items():
        assert states[name][0] == "refused" and words in states[name][1], (name, states[name])
    check_page(page, "connector-upload")
    connector_id = page.url.rsplit("/", 1)[-1]
    syncs = _api(page, f"/api/gateway/v1/connectors/{connector_id}/syncs")["syncs"]
    assert syncs[0]["status"] == "SUCCEEDED", syncs[0]  # files refused at upload never reached it
    assert sorted(s.split(" ", 1)[0] for s in syncs[0]["skipped"]) == ["locked.pdf", "scan.pdf"], syncs[0]

    # ask: the answer needs the PDF's second page; citation [1] opens it in the side panel
    _goto(page, app + "/chat")
    page.fill("#prompt", f"How fast are refund requests for zephyr{TAG} gadgets answered?")
    page.click("#send")
    page.wait_for_url(re.compile(re.escape(app) + r"/chat/chat_\w+"))
    page.wait_for_selector("#messages li.assistant:not(.streaming) .answer button.cite", timeout=60000)
    assert page.locator("#messages li.assistant .answer button.cite").first.text_content() == "[1]"
    page.locator("#messages li.assistant .answer button.cite").first.click()
    page.wait_for_selector("#passage-panel:not([hidden])")
    assert "policy.pdf, page 2" in page.text_content("#passage-title")
    assert "nine business days" in page.text_content("#passage-quote")
    assert page.evaluate("document.activeElement.id") == "passage-title"
    check_page(page, "chat-cited-page")

    # regenerate: a new answer replaces the last one
    first_id = page.get_attribute("#messages li.assistant", "data-id")
    page.click("#regenerate")
    page.wait_for_function("(old) => { const li = document.querySelector('#messages li.assistant:not(.streaming)');"
                           " return li && li.dataset.id && li.dataset.id !== old; }", arg=first_id, timeout=60000)
    assert page.locator("#messages li.assistant").count() == 1
    # thumbs up is stored on the answer
    page.click("#messages li.assistant .thumb[aria-label='Good answer']")
    page.wait_for_selector("#messages li.assistant .thumb[aria-label='Good answer'][aria-pressed=true]")
    chat_id = page.url.rsplit("/", 1)[-1]
    stored = _api(page, f"/api/platform/v1/chats/{chat_id}")
    assert stored["messages"][-1]["feedback"]["rating"] == "up"

    # rename, then find it by the server-side search
    item = page.locator(".chat-list li", has=page.locator(f"a[href='/chat/{chat_id}']"))
    item.locator("button:has-text('Rename')").click()
    page.fill(".chat-list input[aria-label='New title']", f"Refund timing {TAG}")
    page.click(".chat-list button:has-text('Save')")
    page.wait_for_selector(f".chat-list a:text-is('Refund timing {TAG}')")
    listed = page.locator(".chat-list li").count()
    page.fill("#chat-search", f"refund timing {TAG}")
    page.click("#search-chats")
    page.wait_for_selector(".chat-list.search-hits")
    assert [a.get_attribute("href") for a in page.query_selector_all(".chat-list li > a")] == [f"/chat/{chat_id}"]
    page.fill("#chat-search", f"nothing like this {TAG}")
    page.click("#search-chats")
    page.wait_for_selector("#no-match")
    assert "No conversation matches" in page.text_content("#no-match")
    assert page.locator(".chat-list").count() == 0
    page.fill("#chat-search", "")  # clearing the search brings the whole list back
    page.wait_for_selector("#no-match", state="detached")
    page.wait_for_selector(f".chat-list:not(.search-hits) a[href='/chat/{chat_id}']")
    assert page.locator(".chat-list li").count() == listed

    # Stop: the answer's request is held in the network until Stop is pressed
    held: list[Any] = []
    page.route("**/api/platform/v1/chats/*/messages", lambda route: held.append(route))
    page.fill("#prompt", "And how fast do orders ship?")
    page.click("#send")
    page.wait_for_selector("#stop:not([hidden])")
    page.click("#stop")
    page.wait_for_selector("#stopped")
    page.wait_for_selector("#send:enabled")
    assert page.is_hidden("#stop")
    page.unroute("**/api/platform/v1/chats/*/messages")
    for route in held:
        try:
            route.abort()
        except Exception:  # noqa: BLE001 - the browser already cancelled it
            pass


def _sse(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(f"id: {n}\nevent: {e}\ndata: {json.dumps({'sequence': n, **d})}\n\n"
                   for n, (e, d) in enumerate(events, start=1))


def _scripted_answers(page: Any, app: str, answer: str, questions: list[str], origin: str | None = None,
                      choose: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """Asks ``questions`` on a new chat page (after ``choose()`` set its options), each answered with ``answer``
    by a scripted model (a real model cannot be made to answer this deterministically; ``origin: general``
    as the server marks a general answer); everything after the network (the page, the app's renderer, the
    CSP) is the real one. Returns the bodies the page sent."""
    general = {"origin": origin} if origin else {}
    body = _sse([("message_start", {"id": "msg_x", "chat_id": None, "model": "builtin/extractive", "routing": None}),
                 ("content_delta", {"text": answer}),
                 ("citations", {"citations": [], "grounding": {"ratio": 0, **general}, **general}),
                 ("message_stop", {"usage": {}})])
    sent: list[dict[str, Any]] = []

    def answer_post(route: Any) -> None:
        if route.request.method != "POST":
            return route.continue_()
        sent.append(route.request.post_data_json)
        return route.fulfill(status=201, headers={"Content-Type": "text/event-stream"}, body=body)

    page.route("**/api/platform/v1/chats", answer_post)
    try:
        _goto(page, app + "/chat")
        choose()
        for n, question in enumerate(questions, start=1):
            page.fill("#prompt", question)
            page.click("#send")
            page.wait_for_function("(n) => document.querySelectorAll('#messages li.assistant:not(.streaming)').length === n"
                                   " && !document.querySelector('#messages li.streaming')", arg=n)
    finally:
        page.unroute("**/api/platform/v1/chats")
    return sent


def test_a_hostile_answer_renders_inert(platform: Any, admin: Any) -> None:
    app, page = platform.urls["app"], admin
    hostile = ("Here is **bold** and `code`.\n\n<script>window.pwned = 1</script>\n\n"
               '<img src="x" onerror="window.pwned = 2">\n\n[click me](javascript:window.pwned=3)\n\n'
               '<a href="javascript:window.pwned=4">raw link</a> <b>raw bold</b> <iframe src="/"></iframe>\n\n'
               "```html\n<script>window.pwned = 5</script>\n```\n\n"
               '```"><script>window.pwned = 6</script>\nplain\n```\n\n'
               "```python\ndef refund(days):\n    return days <= 9  # business days\n```\n\n"
               "| plan | days |\n|---|---:|\n| <i>basic</i> | 9 |\n")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app)
    _scripted_answers(page, app, hostile, ["Say something dangerous"])
    answer = page.locator("#messages li.assistant .answer")
    assert page.evaluate("window.pwned") is None
    for selector in ("script", "img", "iframe", "a[href^='javascript']", "[onerror]", "b", "i", "[style]"):
        assert answer.locator(selector).count() == 0, selector
    text = answer.text_content()
    assert "<script>window.pwned = 1</script>" in text and "<b>raw bold</b>" in text
    # code blocks: highlighted by token classes, the language named, a copy button each; a hostile
    # language name is no class at all
    assert answer.locator("pre code").first.text_content().startswith("<script>")
    assert answer.locator("code.language-html span.nt").count() >= 2
    assert answer.locator("code.language-python span.k").first.text_content() == "def"
    assert [c.text_content() for c in answer.locator(".code-lang").all()] == ["html", "python"]
    assert answer.locator("pre code:not([class])").text_content() == "plain\n"
    assert page.locator("#messages li.assistant .copy-code").count() == 3
    copy = answer.locator(".code-block", has=page.locator("code.language-python")).locator(".copy-code")
    copy.click()
    page.wait_for_selector("#messages .copy-code[data-state=copied]")
    assert page.evaluate("navigator.clipboard.readText()") == "def refund(days):\n    return days <= 9  # business days\n"
    # the table
    assert [th.text_content() for th in answer.locator("table th").all()] == ["plan", "days"]
    assert answer.locator("table td").first.text_content() == "<i>basic</i>"
    check_page(page)


LONG = ("### Refunds\n\n" + "\n\n".join(f"Step {n}: a refund request is read, checked and answered." for n in range(1, 13))
        + "\n\n```python\n" + "".join(f"print('line {n}')\n" for n in range(1, 16)) + "```\n")


@pytest.mark.parametrize("width", [1280, 375])
def test_a_long_conversation_keeps_the_composer_in_view(platform: Any, admin: Any, width: int) -> None:
    app, page = platform.urls["app"], admin
    page.set_viewport_size({"width": width, "height": 800})
    try:
        _scripted_answers(page, app, LONG, ["How are refunds handled?", "And after that?", "Once more, please."])
        assert page.locator("#messages > li").count() == 6
        assert page.evaluate("document.documentElement.scrollHeight") > 3 * 800  # the messages scroll
        for scroll in ("0", "document.documentElement.scrollHeight / 2", "document.documentElement.scrollHeight"):
            page.evaluate(f"window.scrollTo(0, {scroll})")
            for control in ("#prompt", "#send", "#model"):
                box = page.locator(control).bounding_box()
                assert box and box["y"] >= 0 and box["y"] + box["height"] <= 800, (scroll, control, box)
        assert page.locator("#composer .composer-options").count() == 1  # where answer options go
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        check_page(page)
        # what the reader sees: the window at the end of the conversation (a full-page shot would
        # draw the composer where the window ended)
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{'mobile-' if width == 375 else ''}chat-conversation.png"))
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})


def test_conversations_are_a_drawer_on_a_phone(platform: Any, admin: Any) -> None:
    app, page = platform.urls["app"], admin
    _goto(page, app + "/chat")
    page.wait_for_selector("#chat-drawer .chat-list")  # a sidebar at 1280 px
    assert page.is_hidden("#chat-drawer-toggle")
    page.set_viewport_size({"width": 375, "height": 800})
    try:
        _goto(page, app + "/chat")
        page.wait_for_selector("#chat-drawer .chat-list li", state="attached")
        assert page.is_hidden("#chat-drawer") and page.get_attribute("#chat-drawer-toggle", "aria-expanded") == "false"
        page.click("#chat-drawer-toggle")
        page.wait_for_selector("#chat-drawer .chat-list", state="visible")
        assert page.get_attribute("#chat-drawer-toggle", "aria-expanded") == "true"
        check_page(page, "mobile-chat-drawer")
        page.keyboard.press("Escape")
        page.wait_for_selector("#chat-drawer", state="hidden")
        assert page.evaluate("document.activeElement.id") == "chat-drawer-toggle"
        page.click("#chat-drawer-toggle")
        link = page.locator("#chat-drawer .chat-list li > a").first
        href = link.get_attribute("href")
        link.click()
        page.wait_for_url(app + href)
        ready(page)
        assert page.is_hidden("#chat-drawer") and page.is_visible("#prompt")
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})


def _call(page: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return tuple(page.evaluate("""async ([m, p, b]) => { const r = await fetch(p, {method: m, body: b === null ?
        undefined : JSON.stringify(b), headers: {"X-Requested-With": "app", "Content-Type": "application/json"}});
        return [r.status, r.status === 204 ? null : await r.json()]; }""", [method, path, body]))


def _new_chat_page(page: Any, app: str, answer_mode: str) -> None:
    """The new chat page once its options are drawn (the workspace's answer mode read)."""
    _goto(page, app + "/chat")
    page.wait_for_selector(f"#composer-options[data-answer-mode={answer_mode}]", state="attached")


def test_presets_and_answer_modes_on_the_chat_page(platform: Any, admin: Any) -> None:
    """A preset saved over the API is offered for a new chat and starts it (the stored chat names it); where
    the workspace allows general answers the choice shows and is sent, a general answer is labelled without
    a grounding figure; where it does not, no choice and no mode sent; an open chat shows neither."""
    app, page = platform.urls["app"], admin
    ws = f"/api/platform/v1/workspaces/{page.input_value('#ws-switch')}"
    status, preset = _call(page, "POST", "/api/platform/v1/presets",
                           {"name": f"Short answers {TAG}", "instructions": "Answer in one short sentence."})
    assert status == 201, preset
    try:
        assert _call(page, "PATCH", ws, {"answer_mode": "knowledge_first"})[0] == 200
        _new_chat_page(page, app, "knowledge_first")
        page.wait_for_selector(f"#preset option[value={preset['id']}]", state="attached")
        assert page.is_visible("#preset-choice") and page.is_visible("#mode-choice")
        assert not page.is_checked("#general-allowed")  # sources only unless the person asks
        page.select_option("#preset", preset["id"])
        page.check("#general-allowed")
        check_page(page, "chat-presets")
        page.set_viewport_size({"width": 375, "height": 800})
        try:
            _new_chat_page(page, app, "knowledge_first")
            assert page.is_visible("#mode-choice") and page.is_visible("#prompt") and page.is_visible("#send")
            assert page.evaluate("document.documentElement.scrollWidth") <= 375
            check_page(page, "mobile-chat-presets")
        finally:
            page.set_viewport_size({"width": 1280, "height": 900})

        # a new chat from the preset, allowing general answers (the real model path answers it)
        _new_chat_page(page, app, "knowledge_first")
        page.select_option("#preset", preset["id"])
        page.check("#general-allowed")
        page.fill("#prompt", f"How fast do zephyr{TAG} orders ship?")
        with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/api/platform/v1/chats")) as asked:
            page.click("#send")
        assert asked.value.post_data_json["preset_id"] == preset["id"]
        assert asked.value.post_data_json["mode"] == "general_allowed"
        page.wait_for_url(re.compile(re.escape(app) + r"/chat/chat_\w+"))
        page.wait_for_selector("#messages li.assistant:not(.streaming) .answer", timeout=60000)
        stored = _api(page, f"/api/platform/v1/chats/{page.url.rsplit('/', 1)[-1]}")
        assert (stored["preset_id"], stored["mode"]) == (preset["id"], "general_allowed"), stored
        assert page.is_hidden("#composer-options")  # they apply when a chat starts, not to this one

        # a general answer: labelled, no grounding figure (a sources answer shows its percentage)
        def allow() -> None:
            page.wait_for_selector("#composer-options[data-answer-mode=knowledge_first]", state="attached")
            page.check("#general-allowed")
        sent = _scripted_answers(page, app, "Most parcels arrive within a week.", ["How long does post take?"],
                                 origin="general", choose=allow)
        assert sent[0]["mode"] == "general_allowed" and "preset_id" not in sent[0]
        answer = page.locator("#messages li.assistant").last
        assert answer.locator(".general-answer").text_content() == "General answer - not from your workspace's sources"
        assert "%" not in answer.locator("p.meta").last.text_content()
        check_page(page)

        # sources only: no choice, no mode sent
        def sources_only() -> None:
            page.wait_for_selector("#composer-options[data-answer-mode=knowledge_only]", state="attached")
            assert page.is_visible("#preset-choice") and page.is_hidden("#mode-choice")
        assert _call(page, "PATCH", ws, {"answer_mode": "knowledge_only"})[0] == 200
        sent = _scripted_answers(page, app, "Orders ship within two days.", ["How fast do orders ship?"],
                                 choose=sources_only)
        assert "mode" not in sent[0]
        answer = page.locator("#messages li.assistant").last
        assert answer.locator(".general-answer").count() == 0
        assert "0% of sentences backed" in answer.locator("p.meta").last.text_content()
    finally:
        _call(page, "PATCH", ws, {"answer_mode": "knowledge_only"})
        _call(page, "DELETE", f"/api/platform/v1/presets/{preset['id']}")


def test_s3_connector_through_the_role_grant_step(platform: Any, admin: Any) -> None:
    app, page = platform.urls["app"], admin
    demo_s3 = next(c for c in _api(page, "/api/gateway/v1/connectors")["connectors"] if c["kind"] == "s3")
    _goto(page, app + "/knowledge/connectors")
    page.select_option("#connector-kind", "s3")
    page.wait_for_selector("#trust-policy")
    external_id = page.text_content("#external-id")
    assert external_id == demo_s3["external_id"]
    policy = json.loads(page.text_content("#trust-policy"))
    assert policy["Statement"][0]["Condition"]["StringEquals"]["sts:ExternalId"] == external_id
    check_page(page, "connector-new-s3")
    page.fill("input[name=name]", f"Orders copy {TAG}")
    page.fill("input[name='config.role_arn']", demo_s3["config"]["role_arn"])
    page.fill("input[name='config.bucket']", demo_s3["config"]["bucket"])
    if demo_s3["config"].get("prefix"):
        page.fill("input[name='config.prefix']", demo_s3["config"]["prefix"])
    page.click("#create-connector")
    page.wait_for_url(re.compile(re.escape(app) + r"/knowledge/connectors/conn_\w+"))
    ready(page)
    page.click("#check-access")
    page.wait_for_selector("#check-result")
    assert page.text_content("#check-result") == "Access works."
    # pause, then delete it
    page.click("#pause-toggle")
    page.wait_for_selector("#connector-status .badge:text-is('paused')")
    page.check("#confirm-delete")
    page.click("#delete-connector")
    page.wait_for_url(app + "/knowledge/connectors")
    ready(page)
    assert page.locator(f"a:text-is('Orders copy {TAG}')").count() == 0


def test_build_an_agent_without_json_and_run_it(platform: Any, admin: Any) -> None:
    app, page = platform.urls["app"], admin
    _goto(page, app + "/agents/new")
    page.fill("input[name=name]", f"Refund helper {TAG}")
    page.fill("#agent-instructions", "Answer questions about refunds from the handbook.")
    assert page.is_checked("input[name=tools][value=knowledge_search]")
    page.check("input[name=tools][value=catalog_search]")
    assert page.locator("#agent-model option").count() >= 2  # auto and the offered models
    assert not page.is_visible("#agent-plan")  # the plan editor is an advanced option, folded away
    check_page(page, "agent-builder")
    page.click("#save-agent")
    page.wait_for_url(re.compile(re.escape(app) + r"/agents/agt_\w+$"))
    ready(page)
    page.fill("#run-question", f"How fast are refund requests for zephyr{TAG} gadgets answered?")
    page.click("#start-run")
    page.wait_for_url(re.compile(r".*/runs/run_\w+"))
    page.wait_for_selector("#run-status .badge:text-is('completed')", timeout=90000)
    assert page.locator("#run-steps li[data-status=completed]").count() >= 1
    assert page.text_content("#run-answer").strip()


PAGES = ["/", "/chat", "/knowledge", "/knowledge/query", "/knowledge/connectors", "/agents", "/members", "/audit",
         "/settings", "/workspaces/new"]


@pytest.mark.parametrize("width", [1280, 375])
def test_every_page_reads_clean(platform: Any, admin: Any, width: int) -> None:
    """No "null", no "undefined", and no sideways scroll, on every page (and a dataset and a connector)."""
    app, page = platform.urls["app"], admin
    page.set_viewport_size({"width": width, "height": 900})
    try:
        conns = _api(page, "/api/gateway/v1/connectors")["connectors"]
        extra = [f"/knowledge/connectors/{c['id']}" for c in conns[:6]]
        extra += [f"/knowledge/datasets/{c['dataset']['id']}" for c in conns[:1]]
        for path in PAGES + extra:
            _goto(page, app + path)
            page.wait_for_selector("#main .loading", state="detached")  # lists drawn after the page is ready
            text = page.text_content("#main")
            assert not re.search(r"\bnull\b|\bundefined\b|NaN", text), (path, text[:400])
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, (path, wide)
            name = "home" if path == "/" else path.strip("/").replace("/", "-")
            name = re.sub(r"conn_\w+", f"one-{extra.index(path) if path in extra else 0}", re.sub(r"ds_\w+", "one", name))
            check_page(page, f"{'mobile-' if width == 375 else ''}{name}")
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
    assert SHOTS.exists()
