"""Words of a text as the extractive provider and the grounding check compare them: lower-cased words
of two or more characters without stop words, and crude stems (``refunded`` ~ ``refunds``) so that an
inflection does not hide a match. No dictionary, no model: deterministic and fast."""
from __future__ import annotations

import re

WORD_RE = re.compile(r"\w{2,}", re.U)
STOP = frozenset("the a an and or of to in on for with is are was were be by at as it its this that what which who "
                 "how when where why do does did from about me my our we you your their there any all".split())
_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ed", "es", "s", "ly")


def words(text: str) -> set[str]:
    return {w for w in WORD_RE.findall(text.lower()) if w not in STOP}


def stem(word: str) -> str:
    """``word`` without a common English suffix (``ies``/``ied`` -> ``y``) or a possessive."""
    w = word.lower().replace("\u2019", "'")
    if w.endswith("'s"):
        w = w[:-2]
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[:-len(suf)] + ("y" if suf in ("ies", "ied") else "")
    return w


def same_stem(a: str, b: str) -> bool:
    """Equal stems, or one a prefix of the other of at least four letters, at most three longer
    (``cancel`` ~ ``cancell``, ``reimburs`` ~ ``reimburse``)."""
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= 4 and long_.startswith(short) and len(long_) - len(short) <= 3


def stems(text: str) -> set[str]:
    return {stem(w) for w in words(text)}
