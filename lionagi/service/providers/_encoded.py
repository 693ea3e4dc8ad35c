"""A request body assembled from encoded pieces: each message of a growing history is rendered
and JSON-encoded once.

A chat request carries the whole conversation, so rendering it to the wire format and encoding
it anew costs Python work per message on every request. Conversations grow at the end (a
Branch appends), so :func:`wire_body` keeps the encoded wire form of a conversation's
*settled* prefix -- the messages up to the last point no later message can change -- and renders
and encodes only what follows it. The body is then the encoded fields with that text spliced
in: the bytes a whole encoding would give, in a different key order.

Where the prefix is kept and when it is trusted:

- In the render cache of the conversation's first message (under the wire format's key), so
  it lives as long as the conversation and is shared by every model of that format.
- A request made from a Branch's history (a
  :class:`~lionagi.protocols.messages.RecordedCopy`) names the history it copies. Histories
  are append-only, so once a prefix was checked against a history it stays valid for every
  later copy of it: such a request checks only the messages after the prefix.
- Any other request's messages are compared with the cached ones by list equality (identity
  first, then value, in C): a message replaced or edited anywhere in the prefix (a new
  sequence, a ``model_copy`` with changes) makes the prefix be rebuilt from the request.
- The prefix is read, extended and copied into the body under one lock, so requests for one
  conversation sent from several threads at once each get a whole body.

Where a prefix may end (:class:`WireFormat` says what a format adds): not after an assistant
reply or a tool call (a following tool call joins that assistant message), and not while a
tool call of the current run awaits its result. A call whose run ended unanswered got a
request-only error result (:func:`~lionagi.protocols._render.complete_tool_calls`); a result
for it arriving later would change that, so it drops the prefix.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from lionagi.protocols._render import render_cache
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    MessageManager,
    RecordedCopy,
    System,
)
from lionagi.service._text import clean_json

__all__ = ["WireFormat", "dumps", "wire_body"]

Pieces = list[bytes | bytearray]


def dumps(value: Any) -> bytes:
    """``value`` as the JSON bytes httpx sends for ``json=value`` (lone surrogates escaped)."""
    try:
        return _dumps(value)
    except UnicodeEncodeError:  # a lone surrogate that entered by another door: escape it
        return _dumps(clean_json(value))


def _dumps(value: Any) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8")


class WireFormat:
    """How a provider renders messages, as far as assembling a body from pieces needs.

    ``render(messages, state)`` gives the wire items of ``messages`` and the ``state`` after
    them: what the format carries from one message to later ones (``None`` when nothing). The
    defaults fit a format whose messages render on their own once no tool call waits; a
    format that merges neighbouring messages says where a prefix may end (:meth:`may_end`) and
    whether a cached prefix still ends there for a given continuation (:meth:`fits`).
    ``settings`` is what rendering depends on besides the messages (compared by equality:
    another value starts another prefix).
    """

    #: a leading system message or instruction is encoded on its own (cached on itself): a
    #: request may send a copy of the system message (with context added for this request),
    #: and the prefix of what follows stays valid
    lead_alone = True
    #: a leading system message is no wire item: the caller renders it into another field
    lead_system_apart = False
    initial_state: Any = None

    def __init__(self, key: str, settings: Any = None) -> None:
        self.key = key
        self.settings = settings

    def render(self, messages: Sequence[Message], state: Any) -> tuple[list[Any], Any]:
        raise NotImplementedError

    def may_end(self, tail: Sequence[Message], end: int, state: Any) -> bool:
        """Whether a prefix may end before ``tail[end]`` (``state``: the prefix's, before
        ``tail``)."""
        return True

    def fits(self, tail: Sequence[Message], state: Any) -> bool:
        """Whether a prefix with ``state`` may be followed by ``tail`` as rendered apart."""
        return True


class _Prefix:
    """The settled prefix of one conversation, encoded."""

    __slots__ = (
        "count",
        "encoded",
        "rest",
        "settings",
        "source",
        "state",
        "unanswered",
        "vouched",
    )

    def __init__(self, settings: Any, state: Any) -> None:
        self.settings = settings  # what the rendering depended on besides the messages
        self.count = 0  # how many messages it covers
        self.rest: list[Message] = []  # those after the first (the first owns this prefix)
        self.encoded = bytearray()  # their wire items, encoded and joined by commas
        self.unanswered: set[str] = set()  # calls given a request-only error result
        self.state = state  # the format's state after these messages
        # the history whose messages 1 .. vouched - 1 these are known to be (a request's own
        # messages after a copy of that history, if any, come after them)
        self.source: weakref.ref[MessageManager] | None = None
        self.vouched = 0


_LOCK = threading.Lock()


def wire_body(
    messages: Sequence[Message],
    fmt: WireFormat,
    field: str,
    fields: Callable[[Any], dict[str, Any]],
) -> bytes:
    """The JSON body ``fields(state)`` with ``field`` set to the wire items of ``messages``,
    assembled from this conversation's cached encoded prefix plus the newly rendered rest;
    ``state`` is the format's state after every message."""
    with _LOCK:
        pieces, state = _encoded_history(messages, fmt)
        return _spliced(fields(state), field, pieces)


def _encoded_history(messages: Sequence[Message], fmt: WireFormat) -> tuple[Pieces, Any]:
    """The wire items of ``messages``, encoded and joined by commas (the inside of the JSON
    array, in pieces to join once), and the format's state after them."""
    if not messages:
        return [], fmt.initial_state
    # a request made from a history is read in place (it is not a list copy of it)
    history = messages if isinstance(messages, list | RecordedCopy) else list(messages)
    pieces: Pieces = []
    base = 0
    if len(history) > 1:
        if fmt.lead_system_apart and isinstance(history[0], System):
            base = 1
        elif fmt.lead_alone and isinstance(history[0], System | Instruction):
            pieces.append(_encoded_alone(history[0], fmt))
            base = 1
    cache = render_cache(history[base])
    prefix: _Prefix | None = cache.get(fmt.key)
    if prefix is None or prefix.settings != fmt.settings or not _extends(history, base, prefix):
        prefix = _Prefix(fmt.settings, fmt.initial_state)
        cache[fmt.key] = prefix
    start = base + prefix.count
    tail = history[start:]
    if prefix.count and not fmt.fits(tail, prefix.state):
        prefix = _Prefix(fmt.settings, fmt.initial_state)
        cache[fmt.key] = prefix
        start, tail = base, history[base:]
    settled, unanswered = _settled(tail, fmt, prefix.state)
    if settled:
        items, prefix.state = fmt.render(tail[:settled], prefix.state)
        if prefix.encoded and items:
            prefix.encoded += b","
        prefix.encoded += b",".join(map(dumps, items))
        prefix.rest += tail[:settled] if prefix.count else tail[1:settled]
        prefix.count += settled
        prefix.unanswered |= unanswered
    _vouch(prefix, history, base)
    if prefix.encoded:
        pieces.append(prefix.encoded)
    state = prefix.state
    if settled < len(tail):
        items, state = fmt.render(tail[settled:], state)
        if items:
            pieces.append(b",".join(map(dumps, items)))
    return _joined(pieces), state


def _vouch(prefix: _Prefix, history: Sequence[Message], base: int) -> None:
    """Record which history ``prefix`` is now known to begin, if ``history`` is a copy of one,
    and up to where."""
    if isinstance(history, RecordedCopy):
        source = prefix.source
        if source is None or source() is not history.source:
            prefix.source = weakref.ref(history.source)
        prefix.vouched = min(base + prefix.count, history.recorded)
    else:
        prefix.source = None
        prefix.vouched = 0


def _joined(pieces: Pieces) -> Pieces:
    """``pieces`` with a comma between each two."""
    out: Pieces = []
    for piece in pieces:
        if out:
            out.append(b",")
        out.append(piece)
    return out


def _encoded_alone(message: Message, fmt: WireFormat) -> bytes:
    """One message's encoded wire form, cached on the message for these settings."""
    cache = render_cache(message)
    alone = f"{fmt.key}:alone"
    cached = cache.get(alone)
    if cached is not None and cached[0] == fmt.settings:
        encoded: bytes = cached[1]
        return encoded
    items, _ = fmt.render([message], fmt.initial_state)
    encoded = b",".join(map(dumps, items))
    cache[alone] = (fmt.settings, encoded)
    return encoded


def _extends(history: Sequence[Message], base: int, prefix: _Prefix) -> bool:
    """Whether ``history`` (from ``base`` on) begins with ``prefix`` and answers none of its
    unanswered calls. In a copy of the history the prefix was checked against, the messages
    of that history it covers need no compare: a history is append-only."""
    end = base + prefix.count
    if len(history) < end:
        return False
    checked = base + 1
    source = prefix.source
    if (
        source is not None
        and isinstance(history, RecordedCopy)
        and source() is history.source
        and prefix.vouched > checked
    ):
        checked = min(prefix.vouched, history.recorded)
    if history[checked:end] != prefix.rest[checked - base - 1 :]:
        return False
    return not prefix.unanswered or not any(
        isinstance(m, ActionResponse) and m.call_id in prefix.unanswered for m in history[end:]
    )


def _settled(tail: list[Message], fmt: WireFormat, state: Any) -> tuple[int, set[str]]:
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
        if (
            not waiting
            and not isinstance(message, AssistantResponse)
            and fmt.may_end(tail, index + 1, state)
        ):
            settled, settled_unanswered = index + 1, set(unanswered)
    return settled, settled_unanswered


def _spliced(body: dict[str, Any], field: str, array: Pieces) -> bytes:
    """``body`` encoded with ``field`` set to the JSON array whose inside is the concatenation
    of ``array`` (copied once)."""
    head = dumps(body)
    opening = (b"," if len(head) > 2 else b"") + b'"' + field.encode() + b'":['
    return b"".join((head[:-1], opening, *array, b"]}"))
