"""Per-address and per-IP limits on the sign-in and mail-sending endpoints (429 with ``Retry-After``).

Fixed windows counted in the global ``rate_limits`` table: one item per (limit, subject, window), raised
by a conditional ``UpdateItem`` that succeeds only while the count is under the limit, so the limit is
exact under any concurrency; items expire (TTL) after their window. Subjects are stored hashed (an
address or IP never appears in the table). A refused call does no work and sends nothing.

``SIGNIN_LIMIT_FACTOR`` (settings, default 1) multiplies every count: a test stack that a fuzzer calls
thousands of times from one address raises it instead of switching the limits off.
"""
from __future__ import annotations

from dataclasses import dataclass

from pynamodb.exceptions import UpdateError

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.identity.models import RateLimitAttrs
from chalicelib.identity.opaque import digest


@dataclass(frozen=True)
class Limit:
    name: str
    count: int
    window_seconds: int


MAIL_PER_ADDRESS = Limit("mail-address", 5, 3600)  # reset links and sign-in codes to one address
MAIL_PER_IP = Limit("mail-ip", 30, 3600)
SIGNIN_PER_ADDRESS = Limit("signin-address", 30, 900)  # password, code and MFA attempts for one address
SIGNIN_PER_IP = Limit("signin-ip", 100, 300)
LIMITS = (MAIL_PER_ADDRESS, MAIL_PER_IP, SIGNIN_PER_ADDRESS, SIGNIN_PER_IP)


def hit(limit: Limit, subject: str) -> None:
    """Count one call for ``subject``; a 429 ``rate_limited`` with ``Retry-After`` when over the limit."""
    if not subject:
        return
    now = clock.now()
    window = int(now // limit.window_seconds) * limit.window_seconds
    cls = global_model(RateLimitAttrs)
    key = f"{limit.name}#{digest(subject.strip().lower(), salt=limit.name)}#{window}"
    try:
        cls(key).update(actions=[cls.hits.set((cls.hits | 0) + 1),
                                 cls.expires_at.set(window + limit.window_seconds + 60)],
                        condition=cls.hits.does_not_exist() | (cls.hits < limit.count * settings().signin_limit_factor))
    except UpdateError as err:
        if not condition_failed(err):
            raise
        retry_after = max(1, int(window + limit.window_seconds - now))
        raise ApiError(429, "rate_limited", "Too many attempts; try again later.",
                       headers={"Retry-After": str(retry_after)}) from None
