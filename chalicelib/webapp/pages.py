"""What the app group answers for a page address: the single-page shell, a server-rendered page for
the few moments without a session (sign-in errors, signed out, unknown address), and the static files.

The list of page addresses has one source: ``static/routes.js`` (the browser's router). The server
reads the same patterns to answer 404 for an unknown address before any script runs.
"""
from __future__ import annotations

import hashlib
import html
import json
import posixpath
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from string import Template
from typing import Any

from chalicelib.core.config import settings
from chalicelib.core.process_state import cached
from chalicelib.identity.pages.render import HTML_HEADERS

STATIC_DIR = Path(__file__).parent / "static"
CONTENT_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
STATIC_NAME_RE = re.compile(r"^[a-z0-9_-]{1,64}\.(js|css|svg)$")
ROUTE_RE = re.compile(r'\[\s*"(/[^"]*)"\s*,\s*"([a-z_]+)"')
PAGE_MODULE_RE = re.compile(r'\b([a-z_]+): \(\) => import\("\./(pages/[a-z0-9_]+\.js)"\)')  # main.js's PAGES
IMPORT_RE = re.compile(r'^import [^;]*? from "(\.\.?/[a-z0-9_/]+\.js)";', re.MULTILINE)
MAX_DEPTH = 16  # page addresses up to this many segments have app routes; deeper ones: deep_not_found_page()
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {**HTML_HEADERS, "Content-Security-Policy": CSP}

SHELL = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>AI Platform</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/app.css">
$preloads
<script type="module" src="/static/start/$page.js"></script>
</head>
<body data-auth-url="$auth_url" data-status="$status"$claims$prefetched>
<a class="skip" href="#main">Skip to content</a>
<header class="top" id="top"><a class="brand" href="/">AI Platform</a></header>
<div class="layout">
<nav id="nav" aria-label="Main"></nav>
<main id="main" tabindex="-1" aria-busy="true"><p class="loading" role="status">Loading…</p></main>
</div>
</body>
</html>
""")

PLAIN = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title · AI Platform</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/app.css">
</head>
<body>
$skip<header class="top"><a class="brand" href="/">AI Platform</a></header>
<main id="main" class="plain" tabindex="-1">
<h1>$title</h1>
$body
</main>
</body>
</html>
""")


@cached(maxsize=1, derived=True)
def route_patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    """(compiled pattern, page name) for every page address in ``static/routes.js``."""
    source = (STATIC_DIR / "routes.js").read_text(encoding="utf-8")
    out = []
    for pattern, name in ROUTE_RE.findall(source):
        regex = "^" + re.sub(r":[a-z_]+", "[^/]+", re.escape(pattern).replace(r"\:", ":")) + "$"
        out.append((re.compile(regex), name))
    return tuple(out)


def page_name(path: str) -> str | None:
    """The page a path shows, or None for an unknown address (the query string is ignored)."""
    bare = path.split("?", 1)[0]
    if bare != "/" and bare.endswith("/"):
        bare = bare[:-1]
    for regex, name in route_patterns():
        if regex.match(bare):
            return name
    return None


@cached(maxsize=1, derived=True)
def page_modules() -> dict[str, str]:
    """Page name -> its module under ``static/`` (``pages/home.js``), as ``main.js`` imports it."""
    return dict(PAGE_MODULE_RE.findall((STATIC_DIR / "main.js").read_text(encoding="utf-8")))


@cached(maxsize=64, derived=True)
def module_graph(module: str) -> tuple[str, ...]:
    """``module`` (a path under ``static/``) and every module it imports statically, transitively."""
    seen: list[str] = []
    todo = [module]
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.append(name)
        source = (STATIC_DIR / name).read_text(encoding="utf-8")
        base = PurePosixPath(name).parent
        for spec in IMPORT_RE.findall(source):
            todo.append(posixpath.normpath(str(base / spec)))
    return tuple(seen)


def shell_html(status: int, page: str, claims: dict[str, Any] | None = None,
               prefetched: dict[str, Any] | None = None) -> str:
    """The single-page shell of ``page`` (a page name that has a module: ``page_modules()``), started by
    ``start/{page}.js`` (``start_module``). Its module and what it imports are preloaded with the frame's,
    so the browser fetches them all at once instead of one import level after another; ``claims`` (the
    session's public claims, verified by the caller) are written into ``data-claims`` so the page starts
    without asking ``/session/claims`` first, and ``prefetched`` (API answers for the page's first calls,
    ``prefetch.py``) into ``data-prefetched``."""
    wanted = list(module_graph("main.js"))
    wanted += [m for m in module_graph(page_modules()[page]) if m not in wanted]
    preloads = "\n".join(f'<link rel="modulepreload" href="/static/{m}">' for m in wanted)
    return SHELL.substitute(preloads=preloads, page=page, auth_url=html.escape(settings().auth_url), status=status,
                            claims=_data("claims", claims), prefetched=_data("prefetched", prefetched))


def start_module(page: str) -> str | None:
    """The module the shell of ``page`` runs: it imports ``main.js`` and the page's module statically and
    starts the app with that module, so the first page is drawn without a dynamic ``import()`` (a task
    and 10-50 ms in Chromium even for a module already loaded). None for a name without a page module."""
    module = page_modules().get(page)
    if module is None:
        return None
    return (f'// The app started on the page "{page}" (webapp/pages.py, start_module).\n'
            f'import {{ start }} from "../main.js";\nimport * as page from "../{module}";\n\n'
            f'start("{page}", page);\n')


def _data(name: str, value: dict[str, Any] | None) -> str:
    """`` data-{name}="{JSON}"``, escaped for the attribute (every value stays data), or nothing."""
    return f' data-{name}="{html.escape(json.dumps(value, separators=(",", ":")))}"' if value else ""


def plain_html(title: str, body: str, *, skip_link: bool = True) -> str:
    """A page without the single-page shell; ``body`` is trusted markup built from escaped values."""
    skip = '<a class="skip" href="#main">Skip to content</a>\n' if skip_link else ""
    return PLAIN.substitute(title=html.escape(title), body=body, skip=skip)


def quote_free_csp(origins: Sequence[str]) -> str:
    """A Content-Security-Policy for a page without script, spelled without quoted keywords: API Gateway
    wraps a static header value in single quotes, so a gateway response cannot carry ``'self'`` or
    ``'none'``. ``sandbox`` (no allow-*) runs no script at all, submits no form and gives the page an
    opaque origin; the page's own origins are the only sources, and with no ``unsafe-inline`` no inline
    script or style applies."""
    sources = " ".join(origins)
    if not origins or any(c in sources for c in "';,"):
        raise ValueError(f"origins must be plain scheme://host sources: {origins!r}")
    return f"sandbox; default-src {sources}; form-action {sources}; frame-ancestors {sources}; base-uri {sources}"


def deep_not_found_page(origins: Sequence[str]) -> tuple[int, dict[str, str], str]:
    """(status, headers, body) of the 404 page for an address deeper than ``MAX_DEPTH``, which no app
    route serves. Deployed, API Gateway answers it itself (the app group's gateway responses,
    ``infra/template.py``), so the headers hold no quote and the body no ``$`` or ``#`` (API Gateway
    renders the body as a Velocity template); the local server answers the same (``infra/local_run.py``)."""
    headers = {**HTML_HEADERS, "Content-Security-Policy": quote_free_csp(origins)}
    return 404, headers, plain_html("Page not found", not_found_body(), skip_link=False)


def not_found_body() -> str:
    return ('<p>There is no page at this address. It may have moved, or the link may be mistyped.</p>'
            '<p><a class="button" href="/">Go to the overview</a></p>')


@cached(maxsize=64, derived=True)
def static_file(name: str) -> tuple[bytes, str, str] | None:
    """(content, content type, ETag) of a file in ``static/`` or ``static/pages/``, or of a page's start
    module (``start/{page}.js``); None otherwise."""
    folder, _, leaf = name.rpartition("/")
    if folder not in ("", "pages", "start") or not STATIC_NAME_RE.match(leaf):
        return None
    if folder == "start":
        source = start_module(leaf.removesuffix(".js")) if leaf.endswith(".js") else None
        if source is None:
            return None
        data, suffix = source.encode("utf-8"), ".js"
    else:
        path = STATIC_DIR / folder / leaf if folder else STATIC_DIR / leaf
        if not path.is_file():
            return None
        data, suffix = path.read_bytes(), path.suffix
    return data, CONTENT_TYPES[suffix], '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
