"""Anthropic Messages API over HTTP (``POST {base_url}/v1/messages``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ClassVar

from lionagi.protocols._render import schema_instruction
from lionagi.protocols.messages import ToolCall, Usage
from lionagi.service.errors import ProviderError
from lionagi.service.providers._anthropic_render import anthropic_tool, to_anthropic_messages
from lionagi.service.providers._http import (
    HTTPProvider,
    as_int,
    error_for_status,
    preview,
    server_message_from,
)
from lionagi.service.types import (
    FinalChunk,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    UsageChunk,
)

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicProvider"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096

# error "type" of an Anthropic error payload -> the HTTP status it stands for
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


@dataclass(slots=True)
class _PartialUse:
    index: int
    id: str
    name: str
    arguments: str = ""
    initial: Any = None


class AnthropicProvider(HTTPProvider):
    """Anthropic Messages with ``x-api-key`` auth; ``max_tokens`` defaults to 4096.

    Usage follows the convention shared by every provider: ``input_tokens`` counts the whole
    prompt, of which ``cached_input_tokens`` were read from and ``cache_write_tokens``
    written to the prompt cache.
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
        """The JSON body for ``request``.

        Anthropic has no JSON-schema response mode here, so a ``response_format`` becomes a
        paragraph of the system text asking for a matching JSON object.
        """
        system, messages = to_anthropic_messages(request.messages)
        if request.response_format is not None:
            note = schema_instruction(request.response_format)
            system = note if system is None else f"{system}\n\n{note}"
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": messages,
        }
        if system is not None:
            body["system"] = system
        if request.tools:
            body["tools"] = [anthropic_tool(tool) for tool in request.tools]
        body.update(request.options)
        if stream:
            body["stream"] = True
        else:
            body.pop("stream", None)
        return body

    # -- whole replies -----------------------------------------------------------------
    async def invoke(self, request: ModelRequest) -> ModelResponse:
        data = await self.post_json("/v1/messages", self.body(request, stream=False))
        if not isinstance(data, dict):
            raise self.protocol_error(f"expected a JSON object, got {preview(data)}")
        if data.get("type") == "error":
            raise self._payload_error(data)
        content = data.get("content")
        if not isinstance(content, list):
            raise self.protocol_error(f"answer has no content list: {preview(data)}")
        text: list[str] = []
        calls: list[ToolCall] = []
        for block in content:
            if not isinstance(block, dict):
                raise self.protocol_error(f"malformed content block: {preview(block)}")
            if block.get("type") == "text":
                text.append(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                call = self._tool_call(block.get("id"), block.get("name"), block.get("input"))
                calls.append(call)
        return ModelResponse(
            text="".join(text),
            tool_calls=tuple(calls),
            usage=_usage(data.get("usage")),
            model=data.get("model") or self.model,
            provider=self.name,
            finish_reason=data.get("stop_reason"),
            raw=data,
        )

    # -- streams -----------------------------------------------------------------------
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        body = self.body(request, stream=True)
        text: list[str] = []
        uses: dict[int, _PartialUse] = {}  # content block index -> tool use
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
                        model = message.get("model") or model
                        _merge_usage(raw_usage, message.get("usage"))
                elif kind == "content_block_start":
                    index, block = data.get("index"), data.get("content_block")
                    if not isinstance(index, int) or not isinstance(block, dict):
                        raise self.protocol_error(f"malformed content_block_start: {event.data}")
                    if block.get("type") == "text" and block.get("text"):
                        text.append(str(block["text"]))
                        yield TextDelta(text=str(block["text"]))
                    elif block.get("type") == "tool_use":
                        use = _PartialUse(
                            index=len(uses),
                            id=str(block.get("id") or ""),
                            name=str(block.get("name") or ""),
                            initial=block.get("input"),
                        )
                        uses[index] = use
                        yield ToolCallDelta(index=use.index, id=use.id, name=use.name)
                elif kind == "content_block_delta":
                    chunk = self._delta(data, uses, text)
                    if chunk is not None:
                        yield chunk
                elif kind == "message_delta":
                    delta = data.get("delta")
                    if isinstance(delta, dict) and delta.get("stop_reason"):
                        stop_reason = delta["stop_reason"]
                    _merge_usage(raw_usage, data.get("usage"))
                elif kind == "message_stop":
                    finished = True
                    break
                elif kind == "error":
                    raise self._payload_error(data)
                # "ping", "content_block_stop" and event types added later carry nothing new
        if not finished and stop_reason is None:
            raise self.protocol_error("the stream ended before the reply was complete")
        usage = _usage(raw_usage)
        if raw_usage:
            yield UsageChunk(usage=usage)
        response = ModelResponse(
            text="".join(text),
            tool_calls=tuple(
                self._tool_call(use.id, use.name, use.arguments or use.initial)
                for _, use in sorted(uses.items())
            ),
            usage=usage,
            model=model or self.model,
            provider=self.name,
            finish_reason=stop_reason,
        )
        yield FinalChunk(response=response)

    def _delta(
        self, data: dict[str, Any], uses: dict[int, _PartialUse], text: list[str]
    ) -> StreamChunk | None:
        index, delta = data.get("index"), data.get("delta")
        if not isinstance(index, int) or not isinstance(delta, dict):
            raise self.protocol_error(f"malformed content_block_delta: {preview(data)}")
        kind = delta.get("type")
        if kind == "text_delta":
            piece = str(delta.get("text", ""))
            text.append(piece)
            return TextDelta(text=piece) if piece else None
        if kind == "input_json_delta":
            use = uses.get(index)
            if use is None:
                raise self.protocol_error(f"input_json_delta for unknown block {index}")
            piece = str(delta.get("partial_json", ""))
            use.arguments += piece
            return ToolCallDelta(index=use.index, arguments=piece) if piece else None
        return None  # thinking, signatures, citations: not part of the reply text

    def _tool_call(self, call_id: Any, name: Any, arguments: Any) -> ToolCall:
        if not isinstance(name, str) or not name:
            raise self.protocol_error(f"tool_use block {call_id!r} has no name")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                raise self.protocol_error(
                    f"tool call {name!r} has input that is not JSON: {arguments[:200]!r}"
                ) from None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise self.protocol_error(
                f"tool call {name!r} input must be a JSON object, got {preview(arguments)}"
            )
        return ToolCall(id=str(call_id or ""), name=name, arguments=arguments)

    def _payload_error(self, data: dict[str, Any]) -> ProviderError:
        """The typed error for an ``{"type": "error", "error": {...}}`` payload."""
        error = data.get("error")
        kind = error.get("type") if isinstance(error, dict) else None
        status = _ERROR_STATUS.get(kind, 500) if isinstance(kind, str) else 500
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


def _usage(raw: Any) -> Usage:
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
