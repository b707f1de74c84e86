"""Does a passage entail a statement? A rule-based check that is conservative on purpose: closeness of
wording is not enough, the statement's facts must stand in one place of the passage.

A statement is entailed by a passage when, inside one sentence (or clause) of it:

- **every key term stands there**: each number (digits or number words, ``thirty`` = ``30``), each name
  (a capitalised word that does not open the sentence), month and weekday; the passage's title counts,
  so ``travel-policy-2026.md`` backs ``2026``;
- **each figure keeps its role**: the words around the figure in the statement stand in the passage's
  sentence that holds the figure, nearer to it than to any other figure of that sentence (a real amount
  of another rule of the same policy does not count);
- **negation agrees**: what the passage's sentence denies is not asserted, and what the statement
  denies is denied there (a ``not``, ``no``, ``never``, ``without`` governs the words up to its clause's end);
- **no word stands only elsewhere**: a word of the statement found in another sentence of the passage but
  not in this one means two rules were mixed;
- **its content words are there**: ``COVER`` of them, i.e. all (crude stems, so ``refunded`` = ``refunds``;
  light verbs, modals and attribution words aside).

What it cannot catch (``docs/api/chat.md``): a changed modal verb (``may`` / ``must``), a swapped
relation between two terms both present in the sentence (who did what to whom), a word that flips the
meaning without being a negation ("outside"), and anything implied rather than stated (a correct
paraphrase with other words is not supported).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from chalicelib.core import process_state
from chalicelib.llm.prompt import sentences
from chalicelib.llm.wording import same_stem, stem

COVER = 1.0  # every content word stands in the sentence (0.75 let one substituted word through)
PARTIAL_COVER = 0.5
ROLE_SPAN = 3  # words on either side of a figure that say what it is

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:['\u2019][^\W\d_]+)?", re.U)
STOP = frozenset(
    "the a an and or of to in on for with is are was were be been being by at as it its this that these those "
    "what which who whom whose how when where why do does did from about me my our we you your their there "
    "they them he she his her i us so if then than into onto via up out".split())
WEAK = frozenset(  # carry no fact of their own (modals, light verbs, attribution)
    "get gets got getting have has had having can could may might must shall should will would also just "
    "within according source sources passage passages document documents context based provided state "
    "states stated says said mention mentions mentioned note notes noted yes indeed per use uses used using even"
    .split())
NEGATIONS = frozenset("not no never none nobody nothing cannot without neither nor".split())
UNITS = {  # units of an amount or a duration: a key term (their canonical form)
    **{w: w.rstrip("s") for w in "day days week weeks month months year years hour hours minute minutes quarter "
       "quarters percent seat seats night nights".split()},
    "euro": "euro", "euros": "euro", "eur": "euro", "dollar": "dollar", "dollars": "dollar", "usd": "dollar",
    "km": "km", "kilometre": "km", "kilometres": "km", "kilometer": "km", "kilometers": "km"}
QUANTIFIERS = {  # how much or how often: a key term (their class)
    "all": "all", "every": "all", "each": "all", "any": "all", "only": "only", "half": "half", "full": "full",
    "twice": "twice", "once": "once", "daily": "daily", "weekly": "weekly", "monthly": "monthly",
    "annually": "yearly", "yearly": "yearly", "quarterly": "quarterly", "most": "most", "least": "least"}
PREPOSITIONS = frozenset("after before until since between during over under about around more less than at "
                         "least most only".split())
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


def _plain(t: Token) -> bool:
    """A word that says something of its own (not a stop word, a light verb, a negation or a quantifier)."""
    low = t.text.lower()
    return (t.number is None and len(t.text) > 1 and low not in STOP and low not in WEAK and low not in QUANTIFIERS
            and not _is_negation(t))


def content_stems(toks: list[Token]) -> list[str]:
    return [t.number if t.number is not None else UNITS.get(t.text.lower()) or stem(t.text) for t in toks
            if t.number is not None or _plain(t)]


def _is_date(t: Token) -> bool:
    return t.text.lower() in MONTHS and t.text.lower() != "may"


def key_terms(toks: list[Token]) -> list[Token]:
    """Figures, units, quantifiers, months and weekdays, and names (capitalised, not opening the sentence)."""
    out = []
    opening = True
    for t in toks:
        low = t.text.lower()
        if t.number is not None or _is_date(t) or low in UNITS or low in QUANTIFIERS:
            out.append(t)
        elif t.text[0].isupper() and not opening and _plain(t):
            out.append(t)
        opening = False
    return out


def _anchor(t: Token) -> str | None:
    """What a figure or date is compared by: the figure, or the month/weekday."""
    return t.number if t.number is not None else t.text.lower() if _is_date(t) else None


def governed(text: str, toks: list[Token]) -> tuple[set[str], set[str]]:
    """``(stems of the words a negation governs, stems of the words stated without one)``: a ``not``,
    ``no``, ``never``, ``without``... governs the plain words after it up to the end of its clause."""
    under: set[int] = set()
    for i, t in enumerate(toks):
        if _is_negation(t):
            for j in range(i + 1, len(toks)):
                if any(c in text[toks[j - 1].end:toks[j].start] for c in ",;:.!?"):
                    break
                under.add(j)
    plain = [j for j, t in enumerate(toks) if _plain(t)]
    return {stem(toks[j].text) for j in plain if j in under}, {stem(toks[j].text) for j in plain if j not in under}


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


def _has(stems: list[str] | set[str], word: str) -> bool:
    return word in stems or any(same_stem(word, s) for s in stems)


def _context(statement: list[Token], at: int) -> list[str]:
    """The plain words nearest to ``statement[at]`` (up to ``ROLE_SPAN`` on either side): what it is."""
    def plain(t: Token) -> bool:
        return _plain(t) and t.text.lower() not in UNITS and t.text.lower() not in PREPOSITIONS and _anchor(t) is None

    before = [stem(t.text) for t in statement[:at] if plain(t)][-ROLE_SPAN:]
    after = [stem(t.text) for t in statement[at + 1:] if plain(t)][:ROLE_SPAN]
    return before + after


def _segments(text: str, toks: list[Token]) -> list[int]:
    """The segment of each token: a comma, ``and``, ``but`` or ``or`` starts a new one."""
    out, seg = [], 0
    for i, t in enumerate(toks):
        if i and ("," in text[toks[i - 1].end:t.start] or t.text.lower() in ("and", "but", "or")):
            seg += 1
        out.append(seg)
    return out


def _role_ok(statement: list[Token], at: int, text: str, sentence: list[Token], title: list[str]) -> bool:
    """The words around figure or date ``statement[at]`` belong to it in the passage's sentence ``text``:
    in its segment, or, in a segment without a figure, nearer to it than to any figure or date of the
    sentence that the statement does not state. Words of the document's title alone say nothing here."""
    anchor = _anchor(statement[at])
    context = [w for w in _context(statement, at)
               if not (_has(title, w) and not any(same_stem(w, stem(t.text)) for t in sentence))]
    if not context:
        return True
    stated = {_anchor(t) for t in statement} - {None}
    segment = _segments(text, sentence)
    mine = [i for i, t in enumerate(sentence) if _anchor(t) == anchor]
    others = [i for i, t in enumerate(sentence) if _anchor(t) is not None and _anchor(t) not in stated]
    with_figure = {segment[i] for i in mine + others}

    def belongs(p: int) -> bool:
        near = [m for m in mine if segment[m] == segment[p]] if segment[p] in with_figure else mine
        rivals = [o for o in others if segment[o] == segment[p]] if segment[p] in with_figure else others
        return bool(near) and min(abs(p - m) for m in near) <= min((abs(p - o) for o in rivals), default=10**6)

    owned = sum(1 for word in context if any(
        belongs(i) for i, t in enumerate(sentence) if t.number is None and same_stem(word, stem(t.text))))
    return 2 * owned >= len(context)


def _unit_after(toks: list[Token], at: int) -> str | None:
    """The unit a figure counts (``30 days``, ``12 euros``, ``16 weeks of``), if it is written right after it."""
    for t in toks[at + 1:at + 3]:
        if t.text.lower() in UNITS:
            return UNITS[t.text.lower()]
        if t.number is not None or _plain(t):
            return None
    return None


def _unit_ok(statement: list[Token], at: int, sentence: list[Token]) -> bool:
    """A figure counts the same unit in the statement as in the passage (``three months`` is not ``three days``)."""
    unit = _unit_after(statement, at)
    if unit is None:
        return True
    units = [_unit_after(sentence, i) for i, t in enumerate(sentence) if t.number == statement[at].number]
    return unit in units or all(u is None for u in units)


def _sentence_spans(text: str) -> list[tuple[int, int]]:
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


def _key_present(k: Token, toks: list[Token], stems: list[str]) -> bool:
    low = k.text.lower()
    if k.number is not None:
        return any(t.number == k.number for t in toks)
    if low in QUANTIFIERS:
        return any(QUANTIFIERS.get(t.text.lower()) == QUANTIFIERS[low] for t in toks)
    if low in UNITS:
        return any(UNITS.get(t.text.lower()) == UNITS[low] for t in toks)
    return _has(stems, stem(k.text))


@dataclass(frozen=True)
class _Sentence:
    span: tuple[int, int]
    toks: list[Token]
    stems: list[str]
    under: set[str]  # words a negation governs
    free: set[str]  # words stated without one


@process_state.cached(maxsize=512, derived=True)  # a pure function of the passage's text
def _read(passage: str) -> list[_Sentence]:
    """A passage's sentences (clauses) as the check reads them: once for every statement."""
    out = []
    for s, e in _sentence_spans(passage):
        toks = tokens(passage[s:e])
        under, free = governed(passage[s:e], toks)
        out.append(_Sentence((s, e), toks, content_stems(toks), under, free))
    return out


@dataclass(frozen=True)
class _Claim:
    """A statement as ``check`` compares it with one passage's sentences."""

    toks: list[Token]
    content: list[str]  # its content words' stems
    keys: list[Token]  # its key terms: each must be in the passage
    under: set[str]  # words a negation governs
    title_toks: list[Token]  # the passage's title's words (a year, not "v2", among its numbers)
    title_stems: list[str]
    where: dict[str, set[int]]  # content word -> the passage's sentences holding it
    in_title: set[str]  # content words the title holds


def check(statement: str, passage: str, title: str = "") -> Verdict:
    """Whether ``passage`` (titled ``title``) entails ``statement``, and in which of its sentences."""
    s_toks = tokens(statement)
    content = content_stems(s_toks)
    s_under, _ = governed(statement, s_toks)
    title_toks = [t for t in tokens(title) if t.number is None or len(t.number) == 4]  # a year, not "v2"
    title_stems = content_stems(title_toks)
    read = _read(passage)
    where = {w: {k for k, r in enumerate(read) if _has(r.stems, w)} for w in set(content)}  # sentences holding w
    claim = _Claim(s_toks, content, key_terms(s_toks), s_under, title_toks, title_stems, where,
                   {w for w in where if _has(title_stems, w)})
    best: Verdict | None = None
    for k, r in enumerate(read):
        v = _verdict(claim, k, r, passage)
        if best is None or v.rank > best.rank:
            best = v
    if best is None:  # a passage without a word
        return Verdict(False, 0.0, (0, 0), [t.text for t in claim.keys], ["words_not_in_passage"])
    return best


def _verdict(c: _Claim, k: int, r: _Sentence, passage: str) -> Verdict:
    """The claim against the passage's ``k``-th sentence ``r``."""
    start, end = r.span
    toks = r.toks + c.title_toks
    stems = r.stems + c.title_stems
    covered = [w for w in c.content if k in c.where[w] or w in c.in_title]
    coverage = len(covered) / len(c.content) if c.content else 0.0
    missing = [t.text for t in c.keys if not _key_present(t, toks, stems)]
    numbers_missing = sorted({t.number for t in c.keys if t.number is not None and t.text in missing})
    reasons = ["key_terms_missing"] if missing else []
    if _figure_of_another(c, r, passage[start:end], missing):
        reasons.append("figure_of_another_statement")
    reasons += _word_reasons(c, k, r, covered, coverage)
    return Verdict(not reasons, round(coverage, 4), (start, end), missing, reasons, numbers_missing)


def _figure_of_another(c: _Claim, r: _Sentence, text: str, missing: list[str]) -> bool:
    """A figure or date of the claim that the sentence ``text`` states of something else (or in another unit)."""
    for n, t in enumerate(c.toks):
        anchor = _anchor(t)
        if anchor is not None and t.text not in missing and any(_anchor(x) == anchor for x in r.toks) \
                and not (_role_ok(c.toks, n, text, r.toks, c.title_stems) and _unit_ok(c.toks, n, r.toks)):
            return True
    return False


def _word_reasons(c: _Claim, k: int, r: _Sentence, covered: list[str], coverage: float) -> list[str]:
    """What the sentence's words say against the claim: a negation that differs, words of the claim only
    in other sentences, too few of its words."""
    reasons = []
    denied = r.under - r.free  # what the passage's sentence only denies
    if any(not _has(r.under, w) for w in c.under) or any(_has(denied, w) and not _has(c.under, w)
                                                         for w in c.content):
        reasons.append("negation_differs")
    if any(w not in covered and c.where[w] - {k} for w in c.content):
        reasons.append("words_of_another_statement")
    if not c.content:
        reasons.append("nothing_to_check")
    elif coverage < COVER:
        reasons.append("words_not_in_passage")
    return reasons


def status(v: Verdict) -> str:
    """``supported`` when entailed; ``partial`` when only some words are missing; else ``unsupported``."""
    if v.entailed:
        return "supported"
    return "partial" if v.reasons == ["words_not_in_passage"] and v.coverage >= PARTIAL_COVER else "unsupported"
