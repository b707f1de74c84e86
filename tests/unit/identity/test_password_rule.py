from __future__ import annotations

import pytest

from chalicelib.identity.signin import password_policy as password_rule


@pytest.mark.parametrize("password, why", [
    ("short", "at least 12"), ("x" * 257, "at most 256"), (" " * 12, "blank"), ("aaaaaaaaaaaaa", "repeated"),
    ("qwerty123456", "common"), ("123456654321", "common"), ("Leave me alone", "common"), ("iloveyou2024!!", "common"),
    ("Password123456", "common"), ("baseball baseball", None), (1234, "string"),
])
def test_refused_passwords_say_why(password: object, why: str | None) -> None:
    got = password_rule.problem(password)
    if why is None:
        assert got is None or "common" not in got
    else:
        assert got is not None, got
        assert why in got, got


@pytest.mark.parametrize("password", [
    "correct horse battery staple", "Zürich im Herbst", "кошка на окне", "long-lowercase-only", "ñandú veloz 7",
    "xy" * 128, "12 words or so",
])
def test_allowed_passwords_need_no_composition(password: str) -> None:
    assert password_rule.problem(password) is None


def test_length_counts_code_points_after_nfkc() -> None:
    assert password_rule.problem("ﬃ" * 4) is None  # 4 ligatures are 12 letters after NFKC
    assert password_rule.problem("e\u0301" * 6) is not None  # 12 code points, 6 after NFKC: too short
    assert len(password_rule.normalise("e\u0301")) == 1


def test_email_name_and_service_name_are_refused() -> None:
    assert "e-mail name" in password_rule.problem("kim.tanaka rocks hard", email="kim.tanaka@example.com")
    assert password_rule.problem("kim.tanaka rocks hard", email="ana@example.com") is None
    assert "service" in password_rule.problem("my AI Platform login")


def test_rule_text_states_the_numbers() -> None:
    assert f"at least {password_rule.MIN_LENGTH} characters" in password_rule.RULE_TEXT
    assert password_rule.MAX_LENGTH >= 64
    assert password_rule.MIN_LENGTH >= 8
    assert password_rule.describe() == {"min_length": 12, "max_length": 256, "text": password_rule.RULE_TEXT}
