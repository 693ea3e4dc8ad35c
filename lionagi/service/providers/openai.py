"""OpenAI-compatible chat completions over HTTP (OpenAI, Ollama, vLLM, OpenRouter, Groq, ...).

Replies are read as leniently as the official SDK reads them where that is harmless (content
parts without text, tool arguments sent as a JSON object instead of a string, numeric call ids)
and otherwise rejected with a :class:`~lionagi.service.errors.ProtocolError` naming the field.
Only choice 0 is read, in whole replies and in streams alike.

Reasoning that OpenAI-compatible servers send beside the reply (``reasoning_content``:
DeepSeek, llama.cpp, vLLM; ``reasoning``: vLLM, Ollama, OpenRouter) is read as
:class:`~lionagi.protocols.messages.Reasoning` (format ``"openai"``), streamed as
:class:`~lionagi.service.types.ReasoningDelta` pieces and each run of them ended by a
:class:`~lionagi.service.types.ReasoningEvent`. It is never sent back: those servers take no
reasoning in requests (DeepSeek answers 400).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lionagi.protocols.messages import Reasoning, ToolCall, Usage
from lionagi.service.embeddings import Embeddings, openai_embeddings
from lionagi.service.errors import ProviderError
from lionagi.service.providers._http import (
    HTTPProvider,
    error_for_status,
    server_message_from,
    status_of_error,
)
from lionagi.service.providers._openai_render import openai_body, openai_wire_body
from lionagi.service.providers._usage import openai_usage
from lionagi.service.types import (
    FinalChunk,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    ReasoningEvent,
    StreamChunk,
    StructuredOutput,
    TextDelta,
    ToolCallDelta,
    UsageChunk,
)

__all__ = ["OpenAIChatProvider"]

# fields of a tool call other than these are the provider's own and travel back with the call
_CALL_FIELDS = frozenset({"id", "type", "function", "index"})
# where OpenAI-compatible servers put reasoning text, in order of preference
_REASONING_FIELDS = ("reasoning_content", "reasoning")
_FORMAT = "openai"


@dataclass(slots=True)
class _StreamState:
    """A streamed reply gathered so far."""

    text: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)  # the reasoning run being streamed
    reasoning: list[Reasoning] = field(default_factory=list)  # runs that ended
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    finish_reason: str | None = None


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""
    object_arguments: dict[str, Any] | None = None
    provider_fields: dict[str, Any] = field(default_factory=dict)


class OpenAIChatProvider(HTTPProvider):
    """``POST {base_url}/chat/completions`` with Bearer auth (omitted when there is no key)."""

    name: ClassVar[str] = "openai"
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    api_key_env: ClassVar[str | None] = "OPENAI_API_KEY"
    default_structured_output: ClassVar[StructuredOutput] = "json_schema"

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.api_key is not None:
            headers["authorization"] = f"Bearer {self.api_key.get_secret_value()}"
        return headers

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request``."""
        return openai_body(request, stream=stream, provider=self.name)

    def wire_body(self, request: ModelRequest, *, stream: bool) -> bytes:
        """:meth:`body` as the JSON bytes sent, each message of a growing conversation rendered
        and encoded once (see :mod:`lionagi.service.providers._encoded`)."""
        return openai_wire_body(request, stream=stream, provider=self.name)

    async def embed(
        self, texts: Sequence[str], *, model: str, options: Mapping[str, Any]
    ) -> Embeddings:
        """``POST {base_url}/embeddings`` for one batch (see :mod:`lionagi.service.embeddings`)."""
        return await openai_embeddings(self, texts, model=model, options=options)

    # -- whole replies -----------------------------------------------------------------
    async def invoke(self, request: ModelRequest) -> ModelResponse:
        data = await self.post_json("/chat/completions", self.wire_body(request, stream=False))
        return self._response(data)

    def _response(self, data: Any) -> ModelResponse:
        choice, message = self._choice_message(data)
        return self.response(
            text=self._content(message.get("content")),
            refusal=self.optional_str(message.get("refusal"), "message.refusal") or None,
            tool_calls=self._message_calls(message),
            reasoning=self._reasoning(message),
            usage=self._usage(data.get("usage")),
            model=self.optional_str(data.get("model"), "model"),
            finish_reason=self.optional_str(choice.get("finish_reason"), "finish_reason"),
            raw=data,
        )

    def _choice_message(self, data: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """Choice 0 of a whole reply and its message."""
        if not isinstance(data, dict):
            raise self.protocol_error(f"expected a JSON object, got {self.preview(data)}")
        if data.get("error"):
            raise self._payload_error(data)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self.protocol_error(f"answer has no choices: {self.preview(data)}")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise self.protocol_error(f"choice has no message: {self.preview(choice)}")
        return choice, message

    def _message_calls(self, message: Mapping[str, Any]) -> tuple[ToolCall, ...]:
        raw_calls = self._list_of_calls(message.get("tool_calls"), "message.tool_calls")
        calls: list[ToolCall] = []
        for index, raw in enumerate(raw_calls):
            function = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(function, dict):
                raise self.protocol_error(
                    f"tool_calls[{index}] has no function object: {self.preview(raw)}"
                )
            partial = _PartialCall(
                id=self.call_id(raw.get("id"), index, f"tool_calls[{index}].id"),
                name=self._call_name(function.get("name"), index),
                provider_fields=_provider_fields(raw),
            )
            self._add_arguments(partial, function.get("arguments"), index)
            calls.append(self._tool_call(partial))
        return tuple(calls)

    def _list_of_calls(self, raw_calls: Any, where: str) -> list[Any]:
        if raw_calls is None:
            return []
        if not isinstance(raw_calls, list):
            raise self.protocol_error(f"{where} must be a list, got {self.preview(raw_calls)}")
        return raw_calls

    # -- streams -----------------------------------------------------------------------
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        body = self.wire_body(request, stream=True)
        state = _StreamState()
        done = False
        async with aclosing(self.post_sse("/chat/completions", body)) as events:
            async for event in events:
                if event.data.strip() == "[DONE]":
                    done = True
                    break
                for chunk in self._event_chunks(state, self.event_json(event.data)):
                    yield chunk
        if not done and state.finish_reason is None:
            raise self.protocol_error("the stream ended before the reply was complete")
        if ended := _end_reasoning(state):
            yield ended
        response = self.response(
            text="".join(state.text),
            refusal="".join(state.refusal) or None,
            tool_calls=tuple(self._tool_call(call) for _, call in sorted(state.calls.items())),
            reasoning=tuple(state.reasoning),
            usage=state.usage,
            model=state.model,
            finish_reason=state.finish_reason,
        )
        yield FinalChunk(response=response)

    def _event_chunks(self, state: _StreamState, data: dict[str, Any]) -> Iterator[StreamChunk]:
        """The chunks of one stream event, gathering the reply into ``state``."""
        if data.get("error"):
            raise self._payload_error(data)
        state.model = self.optional_str(data.get("model"), "model") or state.model
        if data.get("usage"):
            state.usage = self._usage(data["usage"])
            yield UsageChunk(usage=state.usage)
        choices = data.get("choices") or []
        if not isinstance(choices, list):
            raise self.protocol_error(f"stream event choices must be a list: {self.preview(data)}")
        for choice in choices:
            yield from self._choice_chunks(state, choice)

    def _choice_chunks(self, state: _StreamState, choice: Any) -> Iterator[StreamChunk]:
        if not isinstance(choice, dict):
            raise self.protocol_error(f"malformed stream choice: {self.preview(choice)}")
        if choice.get("index", 0) != 0:
            return  # n > 1: only choice 0 is read, as in whole replies
        reason = self.optional_str(choice.get("finish_reason"), "finish_reason")
        state.finish_reason = reason or state.finish_reason
        delta = choice.get("delta")
        if delta is None and reason:
            return
        if not isinstance(delta, dict):
            raise self.protocol_error(f"stream choice has no delta object: {self.preview(choice)}")
        if thought := self._reasoning_text(delta, "delta"):
            state.thinking.append(thought)
            yield ReasoningDelta(text=thought)
        content = self._content(delta.get("content"))
        refused = self.optional_str(delta.get("refusal"), "delta.refusal")
        calls = self._list_of_calls(delta.get("tool_calls"), "delta.tool_calls")
        if (content or refused or calls) and (ended := _end_reasoning(state)):
            yield ended  # the reply goes on past its reasoning
        if content:
            state.text.append(content)
            yield TextDelta(text=content)
        if refused:
            state.refusal.append(refused)
        for raw in calls:
            yield self._merge_call(state.calls, raw)

    def _merge_call(self, calls: dict[int, _PartialCall], raw: Any) -> ToolCallDelta:
        if not isinstance(raw, dict):
            raise self.protocol_error(f"malformed tool call delta: {self.preview(raw)}")
        index = self._delta_index(calls, raw)
        function = raw.get("function") or {}
        if not isinstance(function, dict):
            raise self.protocol_error(
                f"tool call delta function must be an object: {self.preview(raw)}"
            )
        fresh = index not in calls
        call = calls.setdefault(index, _PartialCall())
        call_id = self._delta_id(call, raw.get("id"), index, fresh=fresh)
        name = self._delta_name(call, function.get("name"), index)
        piece = self._add_arguments(call, function.get("arguments"), index)
        extra = _provider_fields(raw)
        call.provider_fields.update(extra)
        return ToolCallDelta(
            index=index, id=call_id, name=name, arguments=piece, provider_fields=extra or None
        )

    def _delta_index(self, calls: dict[int, _PartialCall], raw: dict[str, Any]) -> int:
        """The call a delta belongs to; without an index, a new call if it has an id."""
        index = raw.get("index", len(calls) if raw.get("id") else max(calls, default=0))
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.protocol_error(f"tool call delta index must be an int: {self.preview(raw)}")
        return index

    def _delta_id(self, call: _PartialCall, raw_id: Any, index: int, *, fresh: bool) -> str | None:
        """The call id this delta announces (``None`` when it tells nothing new)."""
        call_id: str | None = None
        if raw_id not in (None, ""):
            call_id = self.call_id(raw_id, index, f"tool_calls[{index}].id")
        elif fresh:
            call_id = self.call_id(None, index, "")  # made up once; later deltas keep it
        if call_id is None or call_id == call.id:
            return None
        call.id = call_id
        return call_id

    def _delta_name(self, call: _PartialCall, value: Any, index: int) -> str | None:
        """The function name this delta announces: once, though some servers (llama-cpp-python)
        send it again with every delta."""
        if value in (None, ""):
            return None
        name = self._call_name(value, index)
        if call.name:
            return None
        call.name = name
        return name

    # -- pieces ------------------------------------------------------------------------
    def _reasoning_text(self, message: Mapping[str, Any], where: str) -> str:
        """The reasoning text a message or delta carries ("" when none)."""
        for name in _REASONING_FIELDS:
            text = self.optional_str(message.get(name), f"{where}.{name}")
            if text:
                return text
        return ""

    def _reasoning(self, message: Mapping[str, Any]) -> tuple[Reasoning, ...]:
        text = self._reasoning_text(message, "message")
        return (Reasoning(format=_FORMAT, text=text),) if text else ()

    def _call_name(self, value: Any, index: int) -> str:
        return self.tool_name(value, f"tool_calls[{index}].function.name")

    def _add_arguments(self, call: _PartialCall, value: Any, index: int) -> str:
        """Add an arguments fragment; a JSON object (TGI, llama.cpp) is taken whole."""
        if value is None:
            return ""
        if isinstance(value, dict):
            call.object_arguments = value
            return json.dumps(value, ensure_ascii=False)
        if not isinstance(value, str):
            raise self.protocol_error(
                f"tool_calls[{index}].function.arguments must be a JSON string or object, got "
                f"{self.preview(value)}"
            )
        call.arguments += value
        return value

    def _tool_call(self, call: _PartialCall) -> ToolCall:
        if not call.name:
            raise self.protocol_error(f"tool call {call.id!r} has no function name")
        if call.object_arguments is not None and not call.arguments:
            parsed: Any = call.object_arguments
        else:
            try:
                parsed = json.loads(call.arguments) if call.arguments.strip() else {}
            except RecursionError:
                raise self.protocol_error(
                    f"tool call {call.name!r} has arguments nested too deeply to read"
                ) from None
            except ValueError:
                raise self.protocol_error(
                    f"tool call {call.name!r} has arguments that are not JSON: "
                    f"{self.preview(call.arguments)}"
                ) from None
        if not isinstance(parsed, dict):
            raise self.protocol_error(
                f"tool call {call.name!r} arguments must be a JSON object, got "
                f"{self.preview(call.arguments)}"
            )
        try:
            return ToolCall(
                id=call.id,
                name=call.name,
                arguments=parsed,
                provider_fields=call.provider_fields,
            )
        except (ValueError, RecursionError) as exc:
            raise self.protocol_error(f"tool call {call.name!r} cannot be read: {exc}") from None

    def _content(self, content: Any) -> str:
        """Message text: a string, ``null``, or a list of content parts (some servers)."""
        if content is None:
            return ""
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            pieces: list[str] = []
            for part in content:
                text = part.get("text") if isinstance(part, dict) else None
                if isinstance(text, str):
                    pieces.append(text)  # parts without text (null, images) carry none
            return "".join(pieces)
        raise self.protocol_error(
            f"message content must be a string or a list of parts, got {self.preview(content)}"
        )

    def _usage(self, raw: Any) -> Usage:
        return openai_usage(raw)

    def _payload_error(self, data: Mapping[str, Any]) -> ProviderError:
        """The typed error for an ``{"error": ...}`` payload (in a 200 body or a stream)."""
        error = data.get("error")
        message = self._scrub(server_message_from(dict(data)) or "the server reported an error")
        status = status_of_error(error)
        return error_for_status(
            status, message, provider=self.name, model=self.model, key_hint=self._key_hint()
        )


def _end_reasoning(state: _StreamState) -> ReasoningEvent | None:
    """The reasoning run streamed so far as one finished block (None when there is none)."""
    if not state.thinking:
        return None
    reasoning = Reasoning(format=_FORMAT, text="".join(state.thinking))
    state.thinking.clear()
    state.reasoning.append(reasoning)
    return ReasoningEvent(reasoning=reasoning)


def _provider_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k not in _CALL_FIELDS and v is not None}
