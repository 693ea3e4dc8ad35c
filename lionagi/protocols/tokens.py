"""Pluggable, offline token counting for context budgets.

lionagi needs token counts only to keep context-provider blocks inside a budget, so the default
is an approximation that needs no tokenizer download. Users who want exact counts plug in their
own counter (for example a thin wrapper around ``tiktoken``) with :func:`set_default_counter`
or per registry; lionagi itself never depends on a tokenizer package.
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from lionagi.errors import ConfigurationError

__all__ = [
    "ApproxTokenCounter",
    "TokenCounter",
    "get_default_counter",
    "set_default_counter",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens and cuts text to a token limit.

    ``truncate(text, n)`` returns a prefix of ``text`` with ``count(...) <= n``, and ``text``
    itself when it already fits. It may be called with very long text, so it should stop
    working once the limit is reached rather than tokenize everything.
    """

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...


# A token is a run of up to four ASCII letters/digits/underscores, or any single other visible
# character (punctuation, symbols, and every non-ASCII character). Whitespace is free.
_TOKEN = re.compile(r"[A-Za-z0-9_]{1,4}|[^\sA-Za-z0-9_]")


class ApproxTokenCounter:
    """Offline approximation of BPE token counts; no downloads, no dependencies.

    English words cost about one token per four letters, each punctuation mark or symbol costs
    one, and each non-ASCII character (CJK, accented letters, emoji) costs one. That is close to
    common BPE tokenizers for English prose and deliberately errs high for other scripts, so a
    budget measured with it is rarely exceeded by the real tokenizer.
    """

    __slots__ = ()

    def count(self, text: str) -> int:
        return sum(1 for _ in _TOKEN.finditer(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        if max_tokens == 0:
            return text if _TOKEN.search(text) is None else ""
        for seen, match in enumerate(_TOKEN.finditer(text), start=1):
            if seen == max_tokens:
                end = match.end()
                return text if _TOKEN.search(text, end) is None else text[:end]
        return text

    def __repr__(self) -> str:
        return "ApproxTokenCounter()"


_default_counter: TokenCounter = ApproxTokenCounter()


def get_default_counter() -> TokenCounter:
    """The counter used by registries created without an explicit ``counter``."""
    return _default_counter


def set_default_counter(counter: TokenCounter | None) -> TokenCounter:
    """Install ``counter`` process-wide (``None`` restores the approximation); returns the old one.

    Registries without their own counter read the default at every ``gather``, so the change
    applies to them immediately.
    """
    global _default_counter
    if counter is None:
        counter = ApproxTokenCounter()
    elif not isinstance(counter, TokenCounter):
        raise ConfigurationError(
            f"token counter {counter!r} must have count(text) -> int and "
            "truncate(text, max_tokens) -> str methods"
        )
    previous = _default_counter
    _default_counter = counter
    return previous
