"""Removing an API key from text a server sent back (error messages, echoed requests).

A server may echo the key whole, or a piece of it ("Incorrect API key provided: sk-abc...xyz"),
so every run of at least :data:`MIN_FRAGMENT` characters of the key that holds a digit (or is
twice that long) is masked -- a run of letters alone may be an ordinary word of the key, such
as ``response`` -- and the masking runs before any message is cut short. A placeholder key
(``"none"``, ``"EMPTY"``, ``"sk-no-key-required"``: local servers want *some* key) is not a
secret, and masking it would mangle ordinary words of the server's text, so it is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["MASK", "MIN_FRAGMENT", "Scrubber", "is_placeholder_key"]

MASK = "**********"
#: the shortest piece of a key that is masked: shorter runs match ordinary text too often
MIN_FRAGMENT = 8
# words joined by - _ . or spaces, no digits: "none", "EMPTY", "not-needed", "sk-no-key-required"
_WORDS = re.compile(r"[A-Za-z]+(?:[-_. ][A-Za-z]+)*")


def is_placeholder_key(secret: str) -> bool:
    """Whether ``secret`` is a stand-in rather than a credential: short, or only words."""
    return len(secret) < MIN_FRAGMENT or _WORDS.fullmatch(secret) is not None


class Scrubber:
    """``scrubber(text)``: ``text`` with the key and every long enough piece of it masked."""

    __slots__ = ("_fragments", "_secret")

    def __init__(self, secret: str | None) -> None:
        self._secret = secret if secret and not is_placeholder_key(secret) else None
        self._fragments: frozenset[str] = _pieces(self._secret) if self._secret else frozenset()

    def __call__(self, text: str) -> str:
        secret = self._secret
        if secret is None or not text:
            return text
        text = text.replace(secret, MASK)
        size = MIN_FRAGMENT
        # mark every window of the text that is a piece of the key, then mask the marked runs
        fragments = self._fragments
        hits = [i for i in range(len(text) - size + 1) if text[i : i + size] in fragments]
        out: list[str] = []
        position = 0
        for start, stop in _runs(hits, size):
            run = text[start:stop]
            if len(run) >= 2 * size or any(c.isdigit() for c in run):
                out.append(text[position:start])
                out.append(MASK)
                position = stop
        if not out:
            return text
        out.append(text[position:])
        return "".join(out)


def _pieces(secret: str) -> frozenset[str]:
    """Every run of :data:`MIN_FRAGMENT` characters of ``secret``."""
    return frozenset(secret[i : i + MIN_FRAGMENT] for i in range(len(secret) - MIN_FRAGMENT + 1))


def _runs(hits: list[int], size: int) -> Iterator[tuple[int, int]]:
    """The spans (start, stop) that overlapping or touching windows of ``size`` at ``hits``
    cover, in order."""
    if not hits:
        return
    start = end = hits[0]
    for i in hits[1:]:
        if i <= end + size:
            end = i
            continue
        yield start, end + size
        start = end = i
    yield start, end + size
