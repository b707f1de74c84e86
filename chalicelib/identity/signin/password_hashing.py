"""Password hashing with argon2id (argon2-cffi).

Parameters (OWASP's minimum argon2id configuration, sized for a Lambda function with 512 MiB-1 GiB):
``time_cost=2``, ``memory_cost=19456`` KiB (19 MiB), ``parallelism=1``, 16-byte salt, 32-byte hash.
One hash or verification takes roughly 30-60 ms on one Lambda vCPU and 19 MiB of memory, so a
function can evaluate several in parallel without running out of memory. A stored hash made with other
parameters is re-hashed with these ones the next time its password is verified (``needs_rehash``).

``verify_password`` is the only function that evaluates a user's password; ``burn`` spends the same
work on a fixed dummy hash so that an unknown e-mail or a locked account costs the caller the same time
as a wrong password without evaluating anything. What a new password must be is ``password_rule.py``.
"""
from __future__ import annotations

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

TIME_COST = 2
MEMORY_COST_KIB = 19 * 1024
PARALLELISM = 1
HASH_LEN = 32
SALT_LEN = 16

HASHER = PasswordHasher(time_cost=TIME_COST, memory_cost=MEMORY_COST_KIB, parallelism=PARALLELISM,
                        hash_len=HASH_LEN, salt_len=SALT_LEN, type=Type.ID)
_DUMMY_HASH = HASHER.hash("dummy password that nobody has")


def hash_password(password: str) -> str:
    return HASHER.hash(password)


def verify_password(stored_hash: str, password: str) -> bool:
    """True when ``password`` matches ``stored_hash``; never raises for a mismatch or a bad hash."""
    try:
        return HASHER.verify(stored_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(stored_hash: str) -> bool:
    try:
        return HASHER.check_needs_rehash(stored_hash)
    except (InvalidHashError, ValueError):
        return True


def burn(password: str) -> None:
    """Spend one verification's work on a dummy hash (timing equaliser; evaluates no account)."""
    try:
        HASHER.verify(_DUMMY_HASH, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        pass
