"""A request body assembled from encoded pieces: each message of a growing history is rendered
and JSON-encoded once.

A chat request carries the whole conversation, so rendering it to the wire format and encoding
it anew costs Python work per message on every request. Conversations grow at the end (a
Branch appends), so :func:`encoded_history` keeps the encoded wire form of a conversation's
*settled* prefix -- the messages up to the last point no later message can change -- and renders
and encodes only what follows it. The body is then the encoded options with that text spliced
in (:func:`spliced_body`): the bytes a whole encoding would give, in a different key order.

The prefix is kept in the render cache of the conversation's first message (under the wire
format's key), so it lives as long as the conversation and is shared by every model of that
format. Before it is used, the request's messages are compared with the cached ones by list
equality (identity first, then value): a message replaced or edited anywhere in the prefix
(a new sequence, a ``model_copy`` with changes) makes the prefix be rebuilt from the request.
Only the comparison stays proportional to the history, and it runs in C.

Where a prefix may end: not after an assistant reply or a tool call (a following tool call
joins that assistant message), and not while a tool call of the current run awaits its result.
A call whose run ended unanswered got a request-only error result
(:func:`~lionagi.protocols._render.complete_tool_calls`); a result for it arriving later
would change that, so it drops the prefix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from lionagi.protocols._render import render_cache
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
)
from lionagi.service._text import clean_json

__all__ = ["dumps", "encoded_history", "spliced_body"]

Render = Callable[[Sequence[Message]], list[dict[str, Any]]]


def dumps(value: Any) -> bytes:
    """``value`` as the JSON bytes httpx sends for ``json=value`` (lone surrogates escaped)."""
    try:
        return _dumps(value)
    except UnicodeEncodeError:  # a lone surrogate that entered by another door: escape it
        return _dumps(clean_json(value))


def _dumps(value: Any) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8")


class _Prefix:
    """The settled prefix of one conversation, encoded."""

    __slots__ = ("count", "encoded", "rest", "settings", "unanswered")

    def __init__(self, settings: Any) -> None:
        self.settings = settings  # what the rendering depended on besides the messages
        self.count = 0  # how many messages it covers
        self.rest: list[Message] = []  # those after the first (the first owns this prefix)
        self.encoded = bytearray()  # their wire messages, encoded and joined by commas
        self.unanswered: set[str] = set()  # calls given a request-only error result


def encoded_history(
    messages: Sequence[Message], *, key: str, settings: Any, render: Render
) -> list[bytes | bytearray]:
    """The wire messages ``render`` makes of ``messages``, encoded and joined by commas (the
    inside of the JSON array, in pieces to join once), reusing the cached prefix of this
    conversation.

    ``settings`` is what the rendering depends on besides the messages (compared by equality:
    another value starts another prefix); ``key`` names the wire format in the render cache.
    A leading system message or instruction is encoded on its own (cached on itself): a
    request may send a copy of the system message (with context added for this request), and
    the prefix of what follows stays valid.
    """
    if not messages:
        return []
    history = messages if isinstance(messages, list) else list(messages)
    pieces: list[bytes | bytearray] = []
    base = 0
    if len(history) > 1 and isinstance(history[0], System | Instruction):
        pieces.append(_encoded_alone(history[0], key, settings, render))
        base = 1
    cache = render_cache(history[base])
    prefix: _Prefix | None = cache.get(key)
    if prefix is None or prefix.settings != settings or not _extends(history, base, prefix):
        prefix = _Prefix(settings)
        cache[key] = prefix
    start = base + prefix.count
    tail = history[start:]
    settled, unanswered = _settled(tail)
    if settled:
        if prefix.encoded:
            prefix.encoded += b","
        prefix.encoded += b",".join(map(dumps, render(tail[:settled])))
        prefix.rest += tail[:settled] if prefix.count else tail[1:settled]
        prefix.count += settled
        prefix.unanswered |= unanswered
    if prefix.encoded:
        pieces.append(prefix.encoded)
    if settled < len(tail):
        pieces.append(b",".join(map(dumps, render(tail[settled:]))))
    return _joined(pieces)


def _joined(pieces: list[bytes | bytearray]) -> list[bytes | bytearray]:
    """``pieces`` with a comma between each two."""
    out: list[bytes | bytearray] = []
    for piece in pieces:
        if out:
            out.append(b",")
        out.append(piece)
    return out


def _encoded_alone(message: Message, key: str, settings: Any, render: Render) -> bytes:
    """One message's encoded wire form, cached on the message for these ``settings``."""
    cache = render_cache(message)
    alone = f"{key}:alone"
    cached = cache.get(alone)
    if cached is not None and cached[0] == settings:
        encoded: bytes = cached[1]
        return encoded
    encoded = b",".join(map(dumps, render([message])))
    cache[alone] = (settings, encoded)
    return encoded


def _extends(history: list[Message], base: int, prefix: _Prefix) -> bool:
    """Whether ``history`` (from ``base`` on) begins with ``prefix`` and answers none of its
    unanswered calls."""
    end = base + prefix.count
    if len(history) < end or history[base + 1 : end] != prefix.rest:
        return False
    return not prefix.unanswered or not any(
        isinstance(m, ActionResponse) and m.call_id in prefix.unanswered for m in history[end:]
    )


def _settled(tail: list[Message]) -> tuple[int, set[str]]:
    """How many messages of ``tail`` (which starts where a prefix may end) no later message
    can change, and the tool calls among them left without a result."""
    answered = {m.call_id for m in tail if isinstance(m, ActionResponse)}
    waiting: set[str] = set()  # calls of the current run awaiting a result
    unanswered: set[str] = set()
    settled, settled_unanswered = 0, set[str]()
    for index, message in enumerate(tail):
        if isinstance(message, ActionRequest):
            waiting.add(message.call_id)
            continue
        if isinstance(message, ActionResponse):
            waiting.discard(message.call_id)
        elif waiting:  # the run ended: what it left unanswered gets an error result
            if waiting & answered:
                break  # answered later after all: nothing past here is settled
            unanswered |= waiting
            waiting = set()
        if not waiting and not isinstance(message, AssistantResponse):
            settled, settled_unanswered = index + 1, set(unanswered)
    return settled, settled_unanswered


def spliced_body(body: dict[str, Any], field: str, array: list[bytes | bytearray]) -> bytes:
    """``body`` encoded with ``field`` set to the JSON array whose inside is the concatenation
    of ``array`` (copied once)."""
    head = dumps(body)
    opening = (b"," if len(head) > 2 else b"") + b'"' + field.encode() + b'":['
    return b"".join((head[:-1], opening, *array, b"]}"))
