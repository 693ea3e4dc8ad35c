"""Identifiers: random version-4 UUIDs, made without a system call.

``uuid.uuid4()`` reads 16 bytes from ``os.urandom`` and validates its fields, a few
microseconds each, and a turn makes several (its turn id, one per message). An identifier only
has to be unique, not unpredictable: :func:`new_id` takes its 122 random bits from the
``random`` module (Mersenne Twister, seeded from the operating system at start-up and
reseeded in every forked child), so ids are as unlikely to collide as ``uuid4()``'s. Do not use
them as secrets.
"""

from __future__ import annotations

from random import getrandbits
from uuid import UUID, SafeUUID

__all__ = ["new_id", "new_id_int", "uuid_of"]

_new = object.__new__
# UUID's slots, set through their descriptors: UUID forbids attribute assignment, and
# object.__setattr__ costs each id about 0.8k instructions more
_set_int = UUID.__dict__["int"].__set__
_set_is_safe = UUID.__dict__["is_safe"].__set__
_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))  # the version and variant fields
_V4 = (0x4000 << 64) | (0x8000 << 48)  # version 4, RFC 4122 variant
_UNKNOWN = SafeUUID.unknown


def new_id_int() -> int:
    """A new random version-4 UUID as its 128-bit number (what :func:`uuid_of` makes a UUID)."""
    return getrandbits(128) & _CLEAR | _V4


def uuid_of(number: int) -> UUID:
    """``UUID(int=number)`` for a number known to be in range, without re-checking it."""
    value = _new(UUID)
    _set_int(value, number)
    _set_is_safe(value, _UNKNOWN)
    return value


def new_id() -> UUID:
    """A new random version-4 UUID (equal, hashed and serialized like any other UUID)."""
    value = _new(UUID)
    _set_int(value, getrandbits(128) & _CLEAR | _V4)
    _set_is_safe(value, _UNKNOWN)
    return value
