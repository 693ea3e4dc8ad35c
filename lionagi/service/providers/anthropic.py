"""Anthropic Messages API over HTTP (``POST {base_url}/v1/messages``).

Content blocks other than text and client tool use are read without failing: thinking and
redacted thinking become :class:`~lionagi.protocols.messages.Reasoning` (sent back verbatim in
later requests, as Anthropic requires with tool use); server-tool blocks (web search, code
execution, web fetch, MCP) stay in ``raw`` and are not tool calls of ours. A reply cut by
``max_tokens`` inside a tool input keeps its text and stop reason and drops the cut call.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lionagi.protocols.messages import Reasoning, ToolCall
from lionagi.service.errors import ProtocolError, ProviderError
from lionagi.service.providers._anthropic_render import DEFAULT_MAX_TOKENS, anthropic_body
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
    ReasoningEvent,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    UsageChunk,
)

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicProvider"]

ANTHROPIC_VERSION = "2023-06-01"
_FORMAT = "anthropic"
_THINKING = frozenset({"thinking", "redacted_thinking"})


@dataclass(slots=True)
class _Block:
    """One content block of a streamed reply, as far as it has arrived."""

    type: str
    call: int | None = None  # index among this reply's tool calls, for tool_use blocks
    id: str = ""
    name: str = ""
    arguments: str = ""
    initial: Any = None
    fields: dict[str, Any] = field(default_factory=dict)


class AnthropicProvider(HTTPProvider):
    """Anthropic Messages with ``x-api-key`` auth; ``max_tokens`` defaults to 4096.

    Usage follows the convention shared by every provider: ``input_tokens`` counts the whole
    prompt, of which ``cached_input_tokens`` were read from and ``cache_write_tokens``
    written to the prompt cache. Common options are mapped (``stop`` becomes
    ``stop_sequences``); OpenAI-only ones (``seed``, ``n``, penalties...) are refused.
    """

    name: ClassVar[str] = "anthropic"
    default_base_url: ClassVar[str | None] = "https://api.anthropic.com"
    api_key_env: ClassVar[str | None] = "ANTHROPIC_API_KEY"

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self.api_key is not None:
            headers["x-api-key"] = self.api_key.get_secret_value()
        return headers

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request``."""
        return anthropic_body(request, stream=stream, provider=self.name)

    # -- whole replies -----------------------------------------------------------------
    async def invoke(self, request: ModelRequest) -> ModelResponse:
        data = await self.post_json("/v1/messages", self.body(request, stream=False))
        if not isinstance(data, dict):
            raise self.protocol_error(f"expected a JSON object, got {self.preview(data)}")
        if data.get("type") == "error":
            raise self._payload_error(data)
        content = data.get("content")
        if not isinstance(content, list):
            raise self.protocol_error(f"answer has no content list: {self.preview(data)}")
        text: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[Reasoning] = []
        for position, block in enumerate(content):
            if not isinstance(block, dict):
                raise self.protocol_error(
                    f"content[{position}] is not a block object: {self.preview(block)}"
                )
            kind = block.get("type")
            if kind == "text":
                text.append(self._str(block.get("text"), f"content[{position}].text"))
            elif kind == "tool_use":
                calls.append(
                    self._tool_call(
                        block.get("id"), block.get("name"), block.get("input"), len(calls)
                    )
                )
            elif kind in _THINKING:
                reasoning.append(self._reasoning(block, position))
        return self.response(
            text="".join(text),
            tool_calls=tuple(calls),
            reasoning=tuple(reasoning),
            usage=anthropic_usage(data.get("usage")),
            model=self.optional_str(data.get("model"), "model"),
            finish_reason=self.optional_str(data.get("stop_reason"), "stop_reason"),
            raw=data,
        )

    # -- streams -----------------------------------------------------------------------
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        body = self.body(request, stream=True)
        text: list[str] = []
        blocks: dict[int, _Block] = {}  # content block index -> block
        reasoning: list[Reasoning] = []
        calls = 0
        raw_usage: dict[str, Any] = {}
        model: str | None = None
        stop_reason: str | None = None
        finished = False
        async with aclosing(self.post_sse("/v1/messages", body)) as events:
            async for event in events:
                data = self.event_json(event.data)
                kind = data.get("type", event.event)
                if kind == "message_start":
                    message = data.get("message")
                    if isinstance(message, dict):
                        model = self.optional_str(message.get("model"), "message.model") or model
                        _merge_usage(raw_usage, message.get("usage"))
                elif kind == "content_block_start":
                    index, raw = data.get("index"), data.get("content_block")
                    if not isinstance(index, int) or not isinstance(raw, dict):
                        raise self.protocol_error(
                            f"malformed content_block_start: {self.preview(data)}"
                        )
                    block = _Block(type=str(raw.get("type") or ""), initial=raw.get("input"))
                    blocks[index] = block
                    if block.type == "text":
                        piece = self._str(raw.get("text", ""), "content_block.text")
                        if piece:
                            text.append(piece)
                            yield TextDelta(text=piece)
                    elif block.type == "tool_use":
                        block.call = calls
                        calls += 1
                        block.id = self.call_id(raw.get("id"), block.call, "tool_use id")
                        block.name = self._name(raw.get("name"), block.id)
                        yield ToolCallDelta(index=block.call, id=block.id, name=block.name)
                    elif block.type in _THINKING:
                        block.fields = dict(raw)
                elif kind == "content_block_delta":
                    chunk = self._delta(data, blocks, text)
                    if chunk is not None:
                        yield chunk
                elif kind == "content_block_stop":
                    done = blocks.get(data.get("index"))  # type: ignore[arg-type]
                    if done is not None and done.type in _THINKING:
                        item = self._reasoning(done.fields, data.get("index"))
                        reasoning.append(item)
                        yield ReasoningEvent(reasoning=item)
                elif kind == "message_delta":
                    delta = data.get("delta")
                    if isinstance(delta, dict) and delta.get("stop_reason"):
                        stop_reason = self.optional_str(delta["stop_reason"], "delta.stop_reason")
                    _merge_usage(raw_usage, data.get("usage"))
                elif kind == "message_stop":
                    finished = True
                    break
                elif kind == "error":
                    raise self._payload_error(data)
                # "ping" and event types added later carry nothing we read
        if not finished and stop_reason is None:
            raise self.protocol_error("the stream ended before the reply was complete")
        usage = anthropic_usage(raw_usage)
        if raw_usage:
            yield UsageChunk(usage=usage)
        tool_calls: list[ToolCall] = []
        for _, block in sorted(blocks.items()):
            if block.call is None:
                continue
            try:
                tool_calls.append(
                    self._tool_call(
                        block.id, block.name, block.arguments or block.initial, block.call
                    )
                )
            except ProtocolError:
                if stop_reason != "max_tokens":
                    raise
                # the reply was cut inside this tool input: keep the rest of the reply
        yield FinalChunk(
            response=self.response(
                text="".join(text),
                tool_calls=tuple(tool_calls),
                reasoning=tuple(reasoning),
                usage=usage,
                model=model,
                finish_reason=stop_reason,
            )
        )

    def _delta(
        self, data: dict[str, Any], blocks: dict[int, _Block], text: list[str]
    ) -> StreamChunk | None:
        index, delta = data.get("index"), data.get("delta")
        if not isinstance(index, int) or not isinstance(delta, dict):
            raise self.protocol_error(f"malformed content_block_delta: {self.preview(data)}")
        block = blocks.get(index)
        if block is None:
            raise self.protocol_error(f"content_block_delta for block {index}, which never started")
        kind = delta.get("type")
        if kind == "text_delta":
            piece = self._str(delta.get("text", ""), "text_delta.text")
            text.append(piece)
            return TextDelta(text=piece) if piece else None
        if kind == "input_json_delta":
            piece = self._str(delta.get("partial_json", ""), "input_json_delta.partial_json")
            block.arguments += piece
            if block.call is None or not piece:
                return None  # a server tool's input: the server runs it
            return ToolCallDelta(index=block.call, arguments=piece)
        if kind == "thinking_delta":
            piece = self._str(delta.get("thinking", ""), "thinking_delta.thinking")
            block.fields["thinking"] = str(block.fields.get("thinking") or "") + piece
        elif kind == "signature_delta":
            piece = self._str(delta.get("signature", ""), "signature_delta.signature")
            block.fields["signature"] = str(block.fields.get("signature") or "") + piece
        return None  # citations and later delta types carry no reply text

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
        if not isinstance(value, str) or not value:
            raise self.protocol_error(
                f"tool_use block {call_id!r} name must be a non-empty string, got "
                f"{self.preview(value)}"
            )
        return value

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


def _merge_usage(into: dict[str, Any], usage: Any) -> None:
    """Stream usage is cumulative: later values replace earlier ones field by field."""
    if isinstance(usage, dict):
        into.update({k: v for k, v in usage.items() if v is not None})
