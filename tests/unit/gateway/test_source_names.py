"""Source names are reduced to one canonical form, and every form of a platform resource is refused."""
from __future__ import annotations

import pytest

from chalicelib.core.config import settings
from chalicelib.gateway.ingest import source_names
from chalicelib.gateway.ingest.source_names import Refused

ACCOUNT = "111122223333"


@pytest.mark.parametrize(("given", "canonical"), [
    ("acme-exports", "acme-exports"), ("arn:aws:s3:::acme-exports", "acme-exports"),
    ("s3://acme-exports", "acme-exports"), ("s3://acme-exports/crm/2026/", "acme-exports"),
    (" acme.exports.eu ", "acme.exports.eu"),
])
def test_bucket_forms_reduce_to_the_name(given: str, canonical: str) -> None:
    assert source_names.bucket(given) == canonical


@pytest.mark.parametrize("given", [
    "arn:aws:s3:us-east-1:111122223333:accesspoint/reader", "reader-abcdefghijklmnopqrstu-s3alias",
    "arn:aws:s3-object-lambda:us-east-1:111122223333:accesspoint/x", "bucket--use1-az4--x-s3",
    "arn:aws:s3::111122223333:accesspoint/abc.mrap", "arn:aws:s3:::acme/key", "Acme", "192.168.1.10",
    "xn--bucket", "a..b", 7,
])
def test_indirect_or_invalid_buckets_are_refused(given: object) -> None:
    with pytest.raises(Refused) as err:
        source_names.bucket(given)
    assert err.value.problem["field"] == "bucket"


def test_every_platform_prefix_form_is_refused() -> None:
    prefix = settings().resource_prefix
    for name in (f"{prefix}-data-us-east-1", f"{prefix.upper()}-DATA", f"{prefix}_users", f"{prefix}.x", prefix):
        assert source_names.is_platform_name(name), name
    assert not source_names.is_platform_name(f"{prefix}x-data")
    for form in (f"{prefix}-users", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/{prefix}-users"):
        with pytest.raises(Refused):
            source_names.table(form, region="us-east-1", role_account=ACCOUNT)


def test_table_arns_must_match_region_and_account() -> None:
    arn = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/orders"
    assert source_names.table(arn, region="us-east-1", role_account=ACCOUNT) == "orders"
    for region, account in (("eu-central-1", ACCOUNT), ("us-east-1", "999988887777")):
        with pytest.raises(Refused):
            source_names.table(arn, region=region, role_account=account)
    with pytest.raises(Refused):
        source_names.table(arn + "/index/by_user", region="us-east-1", role_account=ACCOUNT)


def test_roles_of_the_platform_account_are_refused() -> None:
    assert source_names.role(f"arn:aws:iam::{ACCOUNT}:role/path/reader", platform_account="123456789012").endswith(
        "/reader")
    for role in ("arn:aws:iam::123456789012:role/reader", f"arn:aws:iam::{ACCOUNT}:user/reader",
                 f"arn:aws:iam::{ACCOUNT}:role/{settings().resource_prefix}-workers", "reader"):
        with pytest.raises(Refused):
            source_names.role(role, platform_account="123456789012")
