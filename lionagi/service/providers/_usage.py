"""Token usage in the one convention every provider reports.

``Usage.input_tokens`` is the whole prompt; ``cached_input_tokens`` of it were read from a
prompt cache and ``cache_write_tokens`` written to one; ``output_tokens`` is the reply. So
``input_tokens + output_tokens`` is what the call processed, and totals add up across
providers. OpenAI-style servers already count that way (``prompt_tokens`` includes
``cached_tokens``); Anthropic and Claude Code report uncached input apart and are summed here.
"""

from __future__ import annotations

from typing import Any

from lionagi.protocols.messages import Usage

__all__ = ["anthropic_usage", "as_int", "openai_usage"]


def as_int(value: Any) -> int:
    """``value`` if it is a (non-bool) int, else 0: token counts from loosely typed JSON."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def anthropic_usage(raw: Any) -> Usage:
    """Usage from Anthropic's counts, in the shared convention: Anthropic reports uncached
    ``input_tokens`` apart from cache reads and writes, so the whole prompt is their sum."""
    if not isinstance(raw, dict):
        return Usage()
    fresh = as_int(raw.get("input_tokens"))
    read = as_int(raw.get("cache_read_input_tokens"))
    write = as_int(raw.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=fresh + read + write,
        output_tokens=as_int(raw.get("output_tokens")),
        cached_input_tokens=read,
        cache_write_tokens=write,
    )


def openai_usage(raw: Any, *, given: str = "prompt", produced: str = "completion") -> Usage:
    """Usage from OpenAI's counts, which already follow the shared convention: chat
    completions name them ``prompt``/``completion``, the Responses API ``input``/``output``
    (``{given}_tokens``, ``{produced}_tokens``, ``{given}_tokens_details.cached_tokens``)."""
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get(f"{given}_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        input_tokens=as_int(raw.get(f"{given}_tokens")),
        output_tokens=as_int(raw.get(f"{produced}_tokens")),
        cached_input_tokens=as_int(cached),
    )
