"""Does a passage entail a statement? A rule-based check that is conservative on purpose: closeness of
wording is not enough, the statement's facts must stand in one place of the passage.

A statement is entailed by a passage when, inside one sentence of it (or two adjacent sentences):

- **every key term stands there**: each number (digits or number words, ``thirty`` = ``30``), each name
  (a capitalised word that does not open the sentence), month and weekday; the passage's title counts,
  so ``travel-policy-2026.md`` backs ``2026``;
- **each figure keeps its role**: the words around the figure in the statement stand in the passage's
  sentence that holds the figure, nearer to it than to any other figure of that sentence (a real amount
  of another rule of the same policy does not count);
- **negation agrees**: the statement and the passage's sentence both deny, or both assert;
- **its content words are there**: at least ``COVER`` of them (crude stems, so ``refunded`` = ``refunds``).

What it cannot catch (``docs/api/chat.md``): a changed modal verb (``may`` / ``must``), a swapped
relation between two terms both present in the sentence (who did what to whom), a wrong word that is
not a key term when the rest of the sentence still covers ``COVER``, and anything implied rather than
stated (a correct paraphrase with other words is not supported).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

COVER = 0.75
PARTIAL_COVER = 0.5
ROLE_SPAN = 3  # words on either side of a figure that say what it is

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:['\u2019][^\W\d_]+)?", re.U)
STOP = frozenset(
    "the a an and or of to in on for with is are was were be been being by at as it its this that these those "
    "what which who whom whose how when where why do does did from about me my our we you your their there "
    "they them he she his her i us any all so if then than into onto via up out".split())
WEAK = frozenset(  # carry no fact of their own (modals, light verbs, attribution)
    "get gets got getting have has had having can could may might must shall should will would also just "
    "within according source sources passage passages document documents context based provided state "
    "states stated says said mention mentions mentioned note notes noted yes indeed each every per".split())
NEGATIONS = frozenset("not no never none nobody nothing cannot without neither nor".split())
UNITS = frozenset("day days week weeks month months year years hour hours minute minutes euro euros eur usd "
                  "dollar dollars percent seat seats night nights time times".split())
MONTHS = frozenset("january february march april may june july august september october november december "
                   "monday tuesday wednesday thursday friday saturday sunday".split())
_UNITS_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
_ORDINALS = {w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split())}
_ORDINALS.update({"twentieth": 20, "thirtieth": 30})
_SCALES = {"hundred": 100, "thousand": 1000}
_CLAUSE = re.compile(r";\s+")
_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ed", "es", "s", "ly")


def stem(word: str) -> str:
    w = word.lower().replace("\u2019", "'")
    if w.endswith("'s"):
        w = w[:-2]
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[:-len(suf)] + ("y" if suf in ("ies", "ied") else "")
    return w


def same_stem(a: str, b: str) -> bool:
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= 4 and long_.startswith(short) and len(long_) - len(short) <= 3


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int
    number: str | None  # the figure it states, normalised ("30", "1500", "12.5")


def tokens(text: str) -> list[Token]:
    """Words and figures; number words become figures (``thirty-five`` -> ``35``)."""
    raw = list(_TOKEN.finditer(text))
    out: list[Token] = []
    i = 0
    while i < len(raw):
        m = raw[i]
        low = m.group(0).lower()
        num: str | None = None
        end = m.end()
        if low[0].isdigit():
            num = low.replace(",", "")
            if num.count(".") == 1 and num.endswith(".0"):
                num = num[:-2]
        elif low in _TENS:
            value = _TENS[low]
            if i + 1 < len(raw) and raw[i + 1].group(0).lower() in _UNITS_WORDS \
                    and text[m.end():raw[i + 1].start()] in ("-", " ") and _UNITS_WORDS[raw[i + 1].group(0).lower()]:
                value += _UNITS_WORDS[raw[i + 1].group(0).lower()]
                end = raw[i + 1].end()
                i += 1
            num = str(value)
        elif low in _UNITS_WORDS:
            num = str(_UNITS_WORDS[low])
        elif low in _ORDINALS:
            num = str(_ORDINALS[low])
        elif low in _SCALES and out and out[-1].number is not None:
            prev = out.pop()
            num = str(int(float(prev.number or "0") * _SCALES[low]))
            out.append(Token(text[prev.start:m.end()], prev.start, m.end(), num))
            i += 1
            continue
        out.append(Token(text[m.start():end], m.start(), end, num))
        i += 1
    return out


def _is_negation(t: Token) -> bool:
    low = t.text.lower().replace("\u2019", "'")
    return low in NEGATIONS or low.endswith("n't")


def content_stems(toks: list[Token]) -> list[str]:
    return [t.number if t.number is not None else stem(t.text) for t in toks
            if t.number is not None or (t.text.lower() not in STOP and t.text.lower() not in WEAK
                                        and not _is_negation(t) and len(t.text) > 1)]


def key_terms(toks: list[Token]) -> list[Token]:
    """Figures, names (capitalised, not opening the sentence) and months/weekdays."""
    out = []
    opening = True
    for t in toks:
        low = t.text.lower()
        if t.number is not None:
            out.append(t)
        elif low in MONTHS and low != "may":
            out.append(t)
        elif (t.text[0].isupper() and not opening and low not in STOP and low not in WEAK
              and not _is_negation(t)):
            out.append(t)
        opening = False
    return out


@dataclass
class Verdict:
    entailed: bool
    coverage: float  # share of the statement's content words in the chosen window
    window: tuple[int, int]  # the chosen sentences' span in the passage
    missing: list[str] = field(default_factory=list)  # key terms of the statement absent from it
    reasons: list[str] = field(default_factory=list)  # why it is not entailed
    numbers_missing: list[str] = field(default_factory=list)

    @property
    def rank(self) -> tuple[int, int, float]:
        return (int(self.entailed), -len(self.missing) - len(self.reasons), self.coverage)


def _has(stems: list[str], word: str) -> bool:
    return any(same_stem(word, s) for s in stems)


def _role_ok(statement: list[Token], at: int, sentence: list[Token]) -> bool:
    """The words around figure ``statement[at]`` stand nearest to that figure in the passage's sentence."""
    figure = statement[at].number
    context = [stem(t.text) for t in statement[max(0, at - ROLE_SPAN):at + ROLE_SPAN + 1]
               if t.number is None and t.text.lower() not in STOP | WEAK | UNITS and not _is_negation(t)]
    if not context:
        return True
    mine = [i for i, t in enumerate(sentence) if t.number == figure]
    others = [i for i, t in enumerate(sentence) if t.number is not None and t.number != figure]
    owned = 0
    for word in context:
        places = [i for i, t in enumerate(sentence) if t.number is None and same_stem(word, stem(t.text))]
        if any(min(abs(p - m) for m in mine) <= min((abs(p - o) for o in others), default=10**6) for p in places):
            owned += 1
    return owned >= math.ceil(len(context) / 2)


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    from chalicelib.llm.prompt import sentences  # noqa: PLC0415 - keeps this module free of the prompt's imports

    out: list[tuple[int, int]] = []
    for s, e in sentences(text) or [(0, len(text))]:  # and clauses: "...; ..." (a dataset row's fields too)
        pos = s
        for m in _CLAUSE.finditer(text, s, e):
            if text[pos:m.start()].strip():
                out.append((pos, m.start()))
            pos = m.end()
        if text[pos:e].strip():
            out.append((pos, e))
    return out


def check(statement: str, passage: str, title: str = "") -> Verdict:
    """Whether ``passage`` (titled ``title``) entails ``statement``, and where."""
    s_toks = tokens(statement)
    content = content_stems(s_toks)
    keys = key_terms(s_toks)
    negated = any(_is_negation(t) for t in s_toks)
    title_toks = tokens(title)
    title_stems = content_stems(title_toks) + [t.text.lower() for t in title_toks]
    spans = _sentence_spans(passage)
    sent_toks = [tokens(passage[s:e]) for s, e in spans]
    windows = [(i, i) for i in range(len(spans))] + [(i, i + 1) for i in range(len(spans) - 1)]
    best: Verdict | None = None
    for a, b in windows:
        toks = [t for k in range(a, b + 1) for t in sent_toks[k]]
        stems = content_stems(toks) + title_stems
        covered = sum(1 for w in content if _has(stems, w)) if content else 0
        coverage = covered / len(content) if content else 0.0
        numbers_here = {t.number for t in toks} | {t.number for t in title_toks}
        missing, numbers_missing, reasons = [], [], []
        for k in keys:
            if k.number is not None:
                if k.number not in numbers_here:
                    missing.append(k.text)
                    numbers_missing.append(k.number)
            elif not _has(stems, stem(k.text)):
                missing.append(k.text)
        if missing:
            reasons.append("key_terms_missing")
        for n, t in enumerate(s_toks):
            if t.number is None or t.number in numbers_missing:
                continue
            holders = [k for k in range(a, b + 1) if any(x.number == t.number for x in sent_toks[k])]
            if holders and not any(_role_ok(s_toks, n, sent_toks[k]) for k in holders):
                reasons.append("figure_of_another_statement")
                break
        main = max(range(a, b + 1), key=lambda k: sum(1 for w in content if _has(content_stems(sent_toks[k]), w)))
        if negated != any(_is_negation(t) for t in sent_toks[main]):
            reasons.append("negation_differs")
        if not content:
            reasons.append("nothing_to_check")
        elif coverage < COVER:
            reasons.append("words_not_in_passage")
        v = Verdict(not reasons, round(coverage, 4), (spans[a][0], spans[b][1]), missing, reasons,
                    sorted(set(numbers_missing)))
        if best is None or v.rank > best.rank:
            best = v
    assert best is not None
    return best


def status(v: Verdict) -> str:
    """``supported`` when entailed; ``partial`` when only some words are missing; else ``unsupported``."""
    if v.entailed:
        return "supported"
    return "partial" if v.reasons == ["words_not_in_passage"] and v.coverage >= PARTIAL_COVER else "unsupported"
