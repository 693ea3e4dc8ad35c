"""Keeping text that cannot be encoded out of the history.

A lone surrogate (``"\\ud83d"`` without its pair) is a valid Python ``str`` but not UTF-8, so
once recorded every later request fails to encode. JSON allows it (``"\\ud83d"`` escapes), and
so do file names read with ``surrogateescape``. Text from a server or a tool is escaped where it
enters (each lone surrogate becomes its ``\\uXXXX`` spelling, so nothing is silently lost); text
from the caller is rejected with a typed error naming where it is (see :func:`check_text`).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from lionagi.errors import ConfigurationError, LionError

__all__ = ["check_text", "clean_json", "clean_text", "has_lone_surrogate"]

_SURROGATE = re.compile("[\ud800-\udfff]")
T = TypeVar("T")


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a code point UTF-8 cannot encode."""
    return _SURROGATE.search(text) is not None


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by its ``\\uXXXX`` escape text."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def clean_json(value: T) -> T:
    """``value`` (decoded JSON) with :func:`clean_text` applied to every key and string.

    Returns ``value`` itself when nothing needed escaping (the common case costs one scan).
    """
    result: Any = _clean(value)
    return result  # type: ignore[no-any-return]


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        cleaned = [_clean(item) for item in value]
        return value if all(a is b for a, b in zip(cleaned, value, strict=True)) else cleaned
    if isinstance(value, dict):
        return _clean_dict(value)
    return value


def _clean_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    changed = False
    out: dict[Any, Any] = {}
    for key, item in value.items():
        new_key = clean_text(key) if isinstance(key, str) else key
        new_item = _clean(item)
        changed = changed or new_key is not key or new_item is not item
        out[new_key] = new_item
    return out if changed else value


def check_text(text: str, where: str, error: type[LionError] = ConfigurationError) -> str:
    """``text`` unchanged, or ``error`` (a :class:`~lionagi.errors.ConfigurationError`)
    naming ``where`` and the position of a lone surrogate in it."""
    match = _SURROGATE.search(text)
    if match is not None:
        raise error(
            f"{where} holds a lone surrogate {match.group()!r} at position {match.start()}, "
            "which cannot be sent as UTF-8; decode the text with errors='replace' (or fix its "
            "source) before passing it"
        )
    return text
