"""Anthropic Messages API over HTTP (``POST {base_url}/v1/messages``).

Content blocks other than text and client tool use are read without failing: thinking and
redacted thinking become :class:`~lionagi.protocols.messages.Reasoning` (sent back verbatim in
later requests, as Anthropic requires with tool use); server-tool blocks (web search, code
execution, web fetch, MCP) stay in ``raw`` and are not tool calls of ours. A reply cut by
``max_tokens`` inside a tool input keeps its text and stop reason and drops the cut call.

A reply that stops with ``pause_turn`` (a server tool loop ran long) is continued: its content
goes back as the assistant turn, with the reply's ``container`` when it has one, and the next
answer carries on the same reply, up to ``max_pause_continuations`` times.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import Reasoning, ToolCall, Usage
from lionagi.service.errors import ProtocolError, ProviderError
from lionagi.service.providers._anthropic_render import (
    DEFAULT_MAX_TOKENS,
    anthropic_body,
    anthropic_wire_body,
    continued_body,
)
from lionagi.service.providers._http import (
    HTTPProvider,
    error_for_status,
    server_message_from,
    status_of_error,
)
from lionagi.service.providers._usage import anthropic_usage
from lionagi.service.types import (
    FinalChunk,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    ReasoningEvent,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    UsageChunk,
)

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_PAUSE_CONTINUATIONS",
    "DEFAULT_MAX_TOKENS",
    "AnthropicProvider",
]

ANTHROPIC_VERSION = "2023-06-01"
#: how many times a ``pause_turn`` reply is continued before it is returned as it stands
DEFAULT_MAX_PAUSE_CONTINUATIONS = 8
_FORMAT = "anthropic"
_THINKING = frozenset({"thinking", "redacted_thinking"})
_PAUSE = "pause_turn"


@dataclass(slots=True)
class _Turn:
    """What the rounds of one reply (one, or more after ``pause_turn``) have brought so far."""

    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[Reasoning] = field(default_factory=list)
    content: list[dict[str, Any]] = field(default_factory=list)  # every block, as sent back
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    stop_reason: str | None = None
    container: str | None = None


@dataclass(slots=True)
class _Block:
    """One content block of a streamed reply, as far as it has arrived."""

    type: str
    call: int | None = None  # index among this reply's tool calls, for tool_use blocks
    id: str = ""
    name: str = ""
    arguments: str = ""  # input_json_delta pieces
    fields: dict[str, Any] = field(default_factory=dict)  # the block as it started, grown

    def whole(self) -> dict[str, Any]:
        """The block as a whole, with its streamed input parsed (for sending it back)."""
        block = dict(self.fields)
        if self.arguments:
            try:
                block["input"] = json.loads(self.arguments)
            except (ValueError, RecursionError):
                block["input"] = {}
        return block


class AnthropicProvider(HTTPProvider):
    """Anthropic Messages with ``x-api-key`` auth; ``max_tokens`` defaults to 4096.

    Usage follows the convention shared by every provider: ``input_tokens`` counts the whole
    prompt, of which ``cached_input_tokens`` were read from and ``cache_write_tokens``
    written to the prompt cache; a reply continued after ``pause_turn`` sums its requests.
    Common options are mapped (``stop`` becomes ``stop_sequences``); OpenAI-only ones
    (``seed``, ``n``, penalties...) are refused.

    Setting ``max_pause_continuations`` (default 8; 0 returns a paused reply as it stands):
    how many follow-up requests continue a reply that stopped with ``pause_turn``.
    """

    name: ClassVar[str] = "anthropic"
    default_base_url: ClassVar[str | None] = "https://api.anthropic.com"
    api_key_env: ClassVar[str | None] = "ANTHROPIC_API_KEY"
    setting_names: ClassVar[tuple[str, ...]] = (
        *HTTPProvider.setting_names,
        "max_pause_continuations",
    )

    def __init__(self, **kwargs: Any) -> None:
        limit = kwargs.get("max_pause_continuations", DEFAULT_MAX_PAUSE_CONTINUATIONS)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ConfigurationError(
                f"max_pause_continuations must be an int >= 0, got {limit!r:.80}"
            )
        super().__init__(**kwargs)
        self.max_pause_continuations: int = limit

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self.api_key is not None:
            headers["x-api-key"] = self.api_key.get_secret_value()
        return headers

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request``."""
        return anthropic_body(request, stream=stream, provider=self.name)

    def wire_body(self, request: ModelRequest, *, stream: bool) -> bytes:
        """:meth:`body` as the JSON bytes sent, each message of a growing conversation rendered
        and encoded once (see :mod:`lionagi.service.providers._encoded`)."""
        return anthropic_wire_body(request, stream=stream, provider=self.name)

    def _round_body(
        self, request: ModelRequest, turn: _Turn, rounds: int, *, stream: bool
    ) -> dict[str, Any] | bytes:
        """The body of one round: the request, or (after ``pause_turn``) its continuation."""
        if not rounds:
            return self.wire_body(request, stream=stream)
        first = self.body(request, stream=stream)
        return continued_body(first, turn.content, turn.container)

    def _continues(self, turn: _Turn, rounds: int) -> bool:
        return turn.stop_reason == _PAUSE and rounds <= self.max_pause_continuations

    def _final(self, turn: _Turn, raw: dict[str, Any] | None = None) -> ModelResponse:
        return self.response(
            text="".join(turn.text),
            tool_calls=tuple(turn.calls),
            reasoning=tuple(turn.reasoning),
            usage=turn.usage,
            model=turn.model,
            finish_reason=turn.stop_reason,
            raw=raw,
        )

    # -- whole replies -----------------------------------------------------------------
    async def invoke(self, request: ModelRequest) -> ModelResponse:
        turn = _Turn()
        rounds, data = 0, {}
        while rounds == 0 or self._continues(turn, rounds):
            body = self._round_body(request, turn, rounds, stream=False)
            data = await self.post_json("/v1/messages", body)
            self._read_message(data, turn)
            rounds += 1
        return self._final(turn, raw={**data, "content": turn.content})

    def _read_message(self, data: Any, turn: _Turn) -> None:
        """Add one whole answer to ``turn``."""
        if not isinstance(data, dict):
            raise self.protocol_error(f"expected a JSON object, got {self.preview(data)}")
        if data.get("type") == "error":
            raise self._payload_error(data)
        content = data.get("content")
        if not isinstance(content, list):
            raise self.protocol_error(f"answer has no content list: {self.preview(data)}")
        for position, block in enumerate(content):
            if not isinstance(block, dict):
                raise self.protocol_error(
                    f"content[{position}] is not a block object: {self.preview(block)}"
                )
            self._read_block(block, position, turn)
        turn.content.extend(content)
        turn.usage += anthropic_usage(data.get("usage"))
        turn.model = self.optional_str(data.get("model"), "model") or turn.model
        turn.stop_reason = self.optional_str(data.get("stop_reason"), "stop_reason")
        turn.container = _container_id(data) or turn.container

    def _read_block(self, block: dict[str, Any], position: int, turn: _Turn) -> None:
        kind = block.get("type")
        if kind == "text":
            turn.text.append(self._str(block.get("text"), f"content[{position}].text"))
        elif kind == "tool_use":
            call = self._tool_call(
                block.get("id"), block.get("name"), block.get("input"), len(turn.calls)
            )
            turn.calls.append(call)
        elif kind in _THINKING:
            turn.reasoning.append(self._reasoning(block, position))

    # -- streams -----------------------------------------------------------------------
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        turn = _Turn()
        rounds, reported = 0, False
        while rounds == 0 or self._continues(turn, rounds):
            body = self._round_body(request, turn, rounds, stream=True)
            reader = _StreamRound(self, turn)
            async with aclosing(self.post_sse("/v1/messages", body)) as events:
                async for event in events:
                    chunk = reader.feed(self.event_json(event.data), event.event)
                    if chunk is not None:
                        yield chunk
                    if reader.finished:
                        break
            reported = reader.close() or reported
            rounds += 1
        if reported:
            yield UsageChunk(usage=turn.usage)
        yield FinalChunk(response=self._final(turn))

    # -- pieces ------------------------------------------------------------------------
    def _reasoning(self, block: dict[str, Any], where: Any) -> Reasoning:
        thinking = block.get("thinking")
        try:
            return Reasoning(
                format=_FORMAT,
                text=thinking if isinstance(thinking, str) else "",
                block=block,
            )
        except (ValueError, RecursionError):
            raise self.protocol_error(
                f"thinking block {where} cannot be read: {self.preview(block)}"
            ) from None

    def _name(self, value: Any, call_id: str) -> str:
        return self.tool_name(value, f"tool_use block {call_id!r} name")

    def _str(self, value: Any, where: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.protocol_error(f"{where} must be a string, got {self.preview(value)}")
        return value

    def _tool_call(self, call_id: Any, name: Any, arguments: Any, index: int) -> ToolCall:
        ident = self.call_id(call_id, index, "tool_use id")
        name = self._name(name, ident)
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except RecursionError:
                raise self.protocol_error(
                    f"tool call {name!r} has input nested too deeply to read"
                ) from None
            except ValueError:
                raise self.protocol_error(
                    f"tool call {name!r} has input that is not JSON: {self.preview(arguments)}"
                ) from None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise self.protocol_error(
                f"tool call {name!r} input must be a JSON object, got {self.preview(arguments)}"
            )
        return ToolCall(id=ident, name=name, arguments=arguments)

    def _payload_error(self, data: dict[str, Any]) -> ProviderError:
        """The typed error for an ``{"type": "error", "error": {...}}`` payload."""
        error = data.get("error")
        kind = error.get("type") if isinstance(error, dict) else None
        status = status_of_error(error)
        message = self._scrub(server_message_from(data) or "the server reported an error")
        if isinstance(kind, str):
            message = f"{kind}: {message}"
        return error_for_status(
            status, message, provider=self.name, model=self.model, key_hint=self._key_hint()
        )


class _StreamRound:
    """Reads the events of one streamed answer into its reply's :class:`_Turn`."""

    def __init__(self, provider: AnthropicProvider, turn: _Turn) -> None:
        self.p = provider
        self.turn = turn
        self.blocks: dict[int, _Block] = {}  # content block index -> block
        self.calls = len(turn.calls)  # tool calls so far, this answer's included
        self.raw_usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.finished = False
        self._handlers: dict[str, Callable[[dict[str, Any]], StreamChunk | None]] = {
            "message_start": self._message_start,
            "content_block_start": self._block_start,
            "content_block_delta": self._delta,
            "content_block_stop": self._block_stop,
            "message_delta": self._message_delta,
            "message_stop": self._message_stop,
            "error": self._error,
        }

    def feed(self, data: dict[str, Any], event: str) -> StreamChunk | None:
        """The chunk one event stands for, if any ("ping" and later event types carry none)."""
        handler = self._handlers.get(data.get("type", event))
        return None if handler is None else handler(data)

    def close(self) -> bool:
        """Fold the finished answer into the turn; whether the server reported usage."""
        if not self.finished and self.stop_reason is None:
            raise self.p.protocol_error("the stream ended before the reply was complete")
        turn = self.turn
        turn.stop_reason = self.stop_reason
        turn.usage += anthropic_usage(self.raw_usage)
        for _, block in sorted(self.blocks.items()):
            turn.content.append(block.whole())
            if block.call is not None:
                self._add_call(block, block.call)
        return bool(self.raw_usage)

    def _add_call(self, block: _Block, index: int) -> None:
        try:
            call = self.p._tool_call(
                block.id, block.name, block.arguments or block.fields.get("input"), index
            )
        except ProtocolError:
            if self.stop_reason != "max_tokens":
                raise
            return  # the reply was cut inside this tool input: keep the rest of the reply
        self.turn.calls.append(call)

    # -- events ------------------------------------------------------------------------
    def _message_start(self, data: dict[str, Any]) -> None:
        message = data.get("message")
        if isinstance(message, dict):
            model = self.p.optional_str(message.get("model"), "message.model")
            self.turn.model = model or self.turn.model
            _merge_usage(self.raw_usage, message.get("usage"))
            self.turn.container = _container_id(message) or self.turn.container

    def _block_start(self, data: dict[str, Any]) -> StreamChunk | None:
        index, raw = data.get("index"), data.get("content_block")
        if not isinstance(index, int) or not isinstance(raw, dict):
            raise self.p.protocol_error(f"malformed content_block_start: {self.p.preview(data)}")
        block = _Block(type=str(raw.get("type") or ""), fields=dict(raw))
        self.blocks[index] = block
        if block.type == "text":
            piece = self.p._str(raw.get("text", ""), "content_block.text")
            block.fields["text"] = piece
            return self._text(piece)
        if block.type == "tool_use":
            block.call = self.calls
            self.calls += 1
            block.id = self.p.call_id(raw.get("id"), block.call, "tool_use id")
            block.name = self.p._name(raw.get("name"), block.id)
            return ToolCallDelta(index=block.call, id=block.id, name=block.name)
        if block.type == "thinking":
            return _thought(self.p._str(raw.get("thinking", ""), "content_block.thinking"))
        return None

    def _delta(self, data: dict[str, Any]) -> StreamChunk | None:
        index, delta = data.get("index"), data.get("delta")
        if not isinstance(index, int) or not isinstance(delta, dict):
            raise self.p.protocol_error(f"malformed content_block_delta: {self.p.preview(data)}")
        block = self.blocks.get(index)
        if block is None:
            raise self.p.protocol_error(
                f"content_block_delta for block {index}, which never started"
            )
        kind = delta.get("type")
        if kind == "text_delta":
            piece = self.p._str(delta.get("text", ""), "text_delta.text")
            block.fields["text"] = str(block.fields.get("text") or "") + piece
            return self._text(piece)
        if kind == "input_json_delta":
            piece = self.p._str(delta.get("partial_json", ""), "input_json_delta.partial_json")
            block.arguments += piece
            if block.call is None or not piece:
                return None  # a server tool's input: the server runs it
            return ToolCallDelta(index=block.call, arguments=piece)
        return self._grow(block, kind, delta)

    def _grow(self, block: _Block, kind: Any, delta: dict[str, Any]) -> StreamChunk | None:
        """Thinking, signature and citation deltas: kept on the block, no reply text; a
        thinking piece is streamed as reasoning (the signature stays whole)."""
        if kind == "citations_delta":
            citation = delta.get("citation")
            if isinstance(citation, dict):
                block.fields["citations"] = [*(block.fields.get("citations") or []), citation]
            return None
        name = _GROWN.get(kind)
        if name is None:
            return None
        piece = self.p._str(delta.get(name, ""), f"{kind}.{name}")
        block.fields[name] = str(block.fields.get(name) or "") + piece
        return _thought(piece) if kind == "thinking_delta" else None

    def _block_stop(self, data: dict[str, Any]) -> StreamChunk | None:
        where = data.get("index")
        done = self.blocks.get(where) if isinstance(where, int) else None
        if done is None or done.type not in _THINKING:
            return None
        item = self.p._reasoning(done.fields, where)
        self.turn.reasoning.append(item)
        return ReasoningEvent(reasoning=item)

    def _message_delta(self, data: dict[str, Any]) -> None:
        delta = data.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason"):
            self.stop_reason = self.p.optional_str(delta["stop_reason"], "delta.stop_reason")
        if isinstance(delta, dict):
            self.turn.container = _container_id(delta) or self.turn.container
        _merge_usage(self.raw_usage, data.get("usage"))

    def _message_stop(self, data: dict[str, Any]) -> None:
        self.finished = True

    def _error(self, data: dict[str, Any]) -> None:
        raise self.p._payload_error(data)

    def _text(self, piece: str) -> StreamChunk | None:
        self.turn.text.append(piece)
        return TextDelta(text=piece) if piece else None


# delta type -> the block field its pieces grow
_GROWN = {"thinking_delta": "thinking", "signature_delta": "signature"}


def _thought(piece: str) -> ReasoningDelta | None:
    return ReasoningDelta(text=piece) if piece else None


def _container_id(message: dict[str, Any]) -> str | None:
    """The id of the code-execution container a reply ran in (sent back when continuing)."""
    container = message.get("container")
    if isinstance(container, dict):
        ident = container.get("id")
        return ident if isinstance(ident, str) and ident else None
    return None


def _merge_usage(into: dict[str, Any], usage: Any) -> None:
    """Stream usage is cumulative: later values replace earlier ones field by field."""
    if isinstance(usage, dict):
        into.update({k: v for k, v in usage.items() if v is not None})
