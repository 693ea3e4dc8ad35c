"""OpenAI-compatible chat completions over HTTP (OpenAI, Ollama, vLLM, OpenRouter, Groq, ...)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ClassVar

from lionagi.protocols.messages import ToolCall, Usage
from lionagi.service.embeddings import Embeddings, openai_embeddings
from lionagi.service.errors import ProviderError
from lionagi.service.providers._http import (
    HTTPProvider,
    as_int,
    error_for_status,
    preview,
    server_message_from,
)
from lionagi.service.providers._openai_render import openai_tool, to_openai_messages
from lionagi.service.types import (
    FinalChunk,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    UsageChunk,
)

__all__ = ["OpenAIChatProvider"]

_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


class OpenAIChatProvider(HTTPProvider):
    """``POST {base_url}/chat/completions`` with Bearer auth (omitted when there is no key)."""

    name: ClassVar[str] = "openai"
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    api_key_env: ClassVar[str | None] = "OPENAI_API_KEY"

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.api_key is not None:
            headers["authorization"] = f"Bearer {self.api_key.get_secret_value()}"
        return headers

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request``."""
        body: dict[str, Any] = {
            "model": request.model,
            "messages": to_openai_messages(request.messages),
        }
        if request.tools:
            body["tools"] = [openai_tool(tool) for tool in request.tools]
        if request.response_format is not None:
            schema = request.response_format
            title = schema.get("title")
            name = _SCHEMA_NAME.sub("_", title)[:64] if isinstance(title, str) else ""
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name or "response", "schema": schema},
            }
        body.update(request.options)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        else:
            body.pop("stream", None)
            body.pop("stream_options", None)
        return body

    async def embed(
        self, texts: Sequence[str], *, model: str, options: Mapping[str, Any]
    ) -> Embeddings:
        """``POST {base_url}/embeddings`` for one batch (see :mod:`lionagi.service.embeddings`)."""
        return await openai_embeddings(self, texts, model=model, options=options)

    # -- whole replies -----------------------------------------------------------------
    async def invoke(self, request: ModelRequest) -> ModelResponse:
        data = await self.post_json("/chat/completions", self.body(request, stream=False))
        return self._response(data)

    def _response(self, data: Any) -> ModelResponse:
        if not isinstance(data, dict):
            raise self.protocol_error(f"expected a JSON object, got {preview(data)}")
        if "error" in data and "choices" not in data:
            raise self._payload_error(data)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self.protocol_error(f"answer has no choices: {preview(data)}")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise self.protocol_error(f"choice has no message: {preview(choice)}")
        calls: list[ToolCall] = []
        for raw in message.get("tool_calls") or ():
            function = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(function, dict) or not function.get("name"):
                raise self.protocol_error(f"malformed tool call: {preview(raw)}")
            calls.append(
                self._tool_call(
                    str(raw.get("id") or ""), function["name"], function.get("arguments") or ""
                )
            )
        return ModelResponse(
            text=_text(message.get("content")),
            tool_calls=tuple(calls),
            usage=self._usage(data.get("usage")),
            model=data.get("model") or self.model,
            provider=self.name,
            finish_reason=choice.get("finish_reason"),
            raw=data,
        )

    # -- streams -----------------------------------------------------------------------
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        body = self.body(request, stream=True)
        text: list[str] = []
        calls: dict[int, _PartialCall] = {}
        usage = Usage()
        model: str | None = None
        finish_reason: str | None = None
        done = False
        async with aclosing(self.post_sse("/chat/completions", body)) as events:
            async for event in events:
                if event.data.strip() == "[DONE]":
                    done = True
                    break
                data = self.event_json(event.data)
                if "error" in data and "choices" not in data:
                    raise self._payload_error(data)
                model = data.get("model") or model
                if data.get("usage"):
                    usage = self._usage(data["usage"])
                    yield UsageChunk(usage=usage)
                choices = data.get("choices") or []
                if not isinstance(choices, list):
                    raise self.protocol_error(f"malformed stream event: {preview(data)}")
                for choice in choices:
                    delta = choice.get("delta") if isinstance(choice, dict) else None
                    if not isinstance(delta, dict):
                        if isinstance(choice, dict) and choice.get("finish_reason"):
                            finish_reason = choice["finish_reason"]
                            continue
                        raise self.protocol_error(f"malformed stream event: {preview(data)}")
                    content = delta.get("content")
                    if isinstance(content, str) and content:
                        text.append(content)
                        yield TextDelta(text=content)
                    for raw in delta.get("tool_calls") or ():
                        yield self._merge_call(calls, raw)
                    if choice.get("finish_reason"):
                        finish_reason = choice["finish_reason"]
        if not done and finish_reason is None:
            raise self.protocol_error("the stream ended before the reply was complete")
        response = ModelResponse(
            text="".join(text),
            tool_calls=tuple(
                self._tool_call(call.id, call.name, call.arguments)
                for _, call in sorted(calls.items())
            ),
            usage=usage,
            model=model or self.model,
            provider=self.name,
            finish_reason=finish_reason,
        )
        yield FinalChunk(response=response)

    def _merge_call(self, calls: dict[int, _PartialCall], raw: Any) -> ToolCallDelta:
        if not isinstance(raw, dict):
            raise self.protocol_error(f"malformed tool call delta: {preview(raw)}")
        index = raw.get("index", len(calls))
        if not isinstance(index, int):
            raise self.protocol_error(f"tool call delta without an index: {preview(raw)}")
        function = raw.get("function") or {}
        call = calls.setdefault(index, _PartialCall())
        call_id = raw.get("id") or None
        name = function.get("name") or None
        arguments = function.get("arguments") or ""
        if call_id:
            call.id = call_id
        if name and not call.name:
            call.name = name
        call.arguments += arguments
        return ToolCallDelta(index=index, id=call_id, name=name, arguments=arguments)

    # -- pieces ------------------------------------------------------------------------
    def _tool_call(self, call_id: str, name: str, arguments: str) -> ToolCall:
        if not name:
            raise self.protocol_error(f"tool call {call_id!r} has no function name")
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise self.protocol_error(
                f"tool call {name!r} has arguments that are not JSON: {arguments[:200]!r}"
            ) from None
        if not isinstance(parsed, dict):
            raise self.protocol_error(
                f"tool call {name!r} arguments must be a JSON object, got {arguments[:200]!r}"
            )
        return ToolCall(id=call_id, name=name, arguments=parsed)

    def _usage(self, raw: Any) -> Usage:
        if not isinstance(raw, dict):
            return Usage()
        details = raw.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        return Usage(
            input_tokens=as_int(raw.get("prompt_tokens")),
            output_tokens=as_int(raw.get("completion_tokens")),
            cached_input_tokens=as_int(cached),
        )

    def _payload_error(self, data: Mapping[str, Any]) -> ProviderError:
        """The typed error for an ``{"error": ...}`` payload (in a 200 body or a stream)."""
        error = data.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        message = self._scrub(server_message_from(dict(data)) or "the server reported an error")
        status = code if isinstance(code, int) and 400 <= code <= 599 else 500
        return error_for_status(
            status, message, provider=self.name, model=self.model, key_hint=self._key_hint()
        )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""
