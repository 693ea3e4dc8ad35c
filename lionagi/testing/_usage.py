"""Usage the offline models report: whitespace-separated words, one word = one token.

Input counts the words of the text fields of a request's messages; output counts the words of
the reply (a tool call counts the words of its name and JSON arguments). Cheap, deterministic
and enough for budget tests.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
    ToolCall,
)

__all__ = ["InputWords", "json_text", "tool_call_words"]

_WORDS = "testing.words"


def json_text(value: Any) -> str:
    """``value`` as JSON text; what is not JSON is written with ``str``."""
    return json.dumps(value, default=str)


def _message_text(message: Message) -> str:
    if isinstance(message, System | AssistantResponse):
        return message.content
    if isinstance(message, Instruction):
        parts = [p for p in (message.instruction, message.guidance) if p]
        if message.context is not None:
            parts.append(json_text(message.context))
        return " ".join(parts)
    if isinstance(message, ActionRequest):
        return f"{message.function} {json_text(message.arguments)}"
    if isinstance(message, ActionResponse):
        out = message.output
        return out if isinstance(out, str) else json_text(out)
    return ""


def _message_words(message: Message) -> int:
    # Messages are immutable, so each one's count is memoized in its render cache.
    cache = message._render_cache
    count: int | None = cache.get(_WORDS)
    if count is None:
        count = cache[_WORDS] = len(_message_text(message).split())
    return count


class InputWords:
    """Input-word totals of one provider's successive requests, each message counted once.

    A conversation's requests grow by appending, so the previous request (apart from an
    unrecorded instruction at its end, and a request-only copy of the system message at its
    start) is a prefix of the next one. That prefix is recognised with C-level tuple
    comparisons (identity first) rather than a Python loop over the history, which keeps the
    cost of a call flat as a conversation grows. Any other sequence is counted in full.
    """

    __slots__ = ("_rest", "_totals")

    def __init__(self) -> None:
        self._rest: tuple[Message, ...] = ()  # the last request without its first message
        self._totals: list[int] = [0]  # _totals[i]: the words of _rest[:i]

    def count(self, messages: Sequence[Message]) -> int:
        if not messages:
            return 0
        rest = tuple(messages[1:]) if isinstance(messages, list | tuple) else tuple(messages)[1:]
        known, totals = self._rest, self._totals
        shared = min(len(rest), len(known))
        if rest[:shared] != known[:shared]:
            shared -= 1  # the last request ended with a message this one does not repeat
            if shared < 0 or rest[:shared] != known[:shared]:
                pairs = enumerate(zip(rest, known, strict=False))
                shared = next((i for i, (a, b) in pairs if a != b), shared)
        shared = min(shared, len(totals) - 1)
        del totals[shared + 1 :]
        running = totals[shared]
        for message in rest[shared:]:
            running += _message_words(message)
            totals.append(running)
        self._rest = rest
        return _message_words(messages[0]) + running


def tool_call_words(calls: Sequence[ToolCall]) -> int:
    return sum(len(call.name.split()) + len(json_text(call.arguments).split()) for call in calls)
