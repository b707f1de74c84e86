from __future__ import annotations

import json
from pathlib import Path

import pytest

from chalicelib.gateway.ingest import classification, normalize

ROOT = Path(__file__).resolve().parents[3]
LABELLED = ROOT / "tests" / "fixtures" / "gateway" / "pii_columns.jsonl"
PRECISION_FLOOR, RECALL_FLOOR = 0.95, 0.90


def _measure() -> tuple[int, int, float, float, list[tuple[str, str, str]]]:
    rows = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
    tp = fp = fn = 0
    wrong = []
    for row in rows:
        got = classification.classify(row["name"], row["samples"])
        if got != row["expected"]:
            wrong.append((row["name"], row["expected"], got))
        tp += got == "PII" and row["expected"] == "PII"
        fp += got == "PII" and row["expected"] != "PII"
        fn += got != "PII" and row["expected"] == "PII"
    return len(rows), tp + fn, tp / (tp + fp), tp / (tp + fn), wrong


def test_labelled_set_precision_and_recall_meet_the_floor_and_match_the_docs() -> None:
    total, positives, precision, recall, wrong = _measure()
    assert total >= 250
    assert 0.3 < positives / total < 0.7  # a real mix of PII and not
    assert precision >= PRECISION_FLOOR, wrong
    assert recall >= RECALL_FLOOR, wrong
    line = (f"{total} labelled columns ({positives} PII): precision {precision:.2f}, recall {recall:.2f}")
    assert line in (ROOT / "docs" / "api" / "gateway.md").read_text(encoding="utf-8"), line


@pytest.mark.parametrize("name", ["Full Name", "fullName", "full_name", "FULL-NAME", "Prénom", "Nachname",
                                  "Straße", "Date of Birth", "customerEMail", "Teléfono", "IPAddress"])
def test_person_columns_are_pii_by_normalised_name(name: str) -> None:
    assert classification.classify(name, []) == "PII"


@pytest.mark.parametrize("name", ["file_name", "product_name", "company_name", "email_verified", "phone_model",
                                  "address_type", "server_ip", "filename", "created_at"])
def test_columns_about_things_are_not_pii_by_name(name: str) -> None:
    assert classification.classify(name, ["x"]) == "INTERNAL"


@pytest.mark.parametrize("values", [
    ["2024-01-15", "2023-12-31", "1999-07-04"], ["15.01.2024", "31.12.2023"], ["01/15/2024", "12/31/2023"],
    ["2024-01-15T10:00:00Z", "2024-02-01 08:30"], ["13:45:00", "08:00:12"], ["1,234.56", "12.50", "-3.00"],
    ["1.234,56", "999,00"], ["12345678", "87654321"], ["INV-2024-00017", "INV-2024-00018"],
    ["10.0.0.12", "192.168.1.4"], ["4111 1111 1111 1112"], ["9780306406157", "4006381333931"],
])
def test_dates_amounts_and_ids_are_not_pii_by_value(values: list[str]) -> None:
    assert classification.classify("col", values) == "INTERNAL"


@pytest.mark.parametrize("values, kind", [
    (["+49 30 1234567"], "phone"), (["(415) 555-2671"], "phone"), (["07700 900123"], "phone"),
    (["0049 89 12345678"], "phone"), (["+14155552671"], "phone"), (["DE89 3704 0044 0532 0130 00"], "iban"),
    (["4111 1111 1111 1111"], "card"), (["536-22-8726"], "ssn"), (["a.b@example.com"], "email"),
    (["203.0.113.7"], "ip"), (["Ana García"], "person_name"), (["Müller, Jürgen"], "person_name"),
])
def test_values_are_recognised_by_kind(values: list[str], kind: str) -> None:
    assert classification.pii_kind(values[0]) == kind
    assert classification.classify("col", values) == "PII"


def test_free_text_carrying_contact_details_is_pii() -> None:
    notes = ["Please call me back at +44 20 7946 0958 tomorrow.", "Write to j.doe@firma.de about the invoice.",
             "Delivered on time, customer happy with it.", "Renewal pending legal review of terms."]
    assert classification.classify("notes", notes) == "PII"
    assert classification.classify("notes", notes[2:]) == "INTERNAL"


def test_credentials_and_pay_are_confidential_unless_values_are_pii() -> None:
    assert classification.classify("password_hash", ["ab12"]) == "CONFIDENTIAL"
    assert classification.classify("Salary", ["50000"]) == "CONFIDENTIAL"


def test_plan_masks_a_full_name_column_and_leaves_dates_unmasked() -> None:
    rows = [({"Full Name": "Ana García", "Signed": "2024-01-15"}, True),
            ({"Full Name": "John Smith", "Signed": "2024-02-01"}, True)]
    schema, _, _ = normalize.plan([], rows, "t0", 0)
    by_name = {f["name"]: f for f in schema}
    assert (by_name["full_name"]["classification"], by_name["full_name"]["policy"]) == ("PII", "MASK")
    assert (by_name["signed"]["classification"], by_name["signed"]["policy"]) == ("INTERNAL", "ALLOW")
