"""The OpenAI Responses API (``POST {base_url}/responses``) as a provider.

Beside chat completions, the Responses API returns a list of typed *output items* (messages,
function calls, reasoning). A reasoning model's reasoning items must go back to the API on the
next turn for it to keep its chain of thought across tool calls; this provider keeps every
reply's output items in ``ModelResponse.raw``, which the conversation records on the assistant
message, and sends them back verbatim when it renders that message again.

A streamed reply is recorded whole when it completes (its output items arrive only then); its
text, reasoning and tool-call deltas still reach live views as they come.

A reasoning item's readable text (its ``reasoning_text`` content, then its summary parts) is
also kept as :class:`~lionagi.protocols.messages.Reasoning` (format ``"openai_responses"``) on
the reply, its parts joined by a blank line; the streamed deltas spell the same text (a delta
that starts a later part of the same item begins with that blank line).

With ``store=False`` (the request is not kept on OpenAI's side) pass
``include=["reasoning.encrypted_content"]`` so the reasoning items carry their content back.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, ClassVar, TypeAlias

from lionagi.protocols._render import complete_tool_calls
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    Reasoning,
    System,
    ToolCall,
    Usage,
)
from lionagi.protocols.tool_spec import ToolSpec
from lionagi.service._options import drop_tool_settings
from lionagi.service.errors import ProviderError, ServerError
from lionagi.service.providers._encoded import WireFormat, dumps, wire_body
from lionagi.service.providers._http import as_int, preview
from lionagi.service.providers._openai_render import TOOL_SETTINGS
from lionagi.service.providers._usage import openai_usage
from lionagi.service.providers.openai import OpenAIChatProvider, _PartialCall
from lionagi.service.types import (
    FinalChunk,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    UsageChunk,
)

__all__ = ["OpenAIResponsesProvider", "to_responses_input"]

_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_FORMAT = "openai_responses"
_PART_BREAK = "\n\n"  # between the readable parts of one reasoning item


class OpenAIResponsesProvider(OpenAIChatProvider):
    """OpenAI's Responses API: text, function tools, structured output (``text.format``),
    streaming (typed ``response.*`` events) and reasoning items kept across turns.

    Same key (``OPENAI_API_KEY``), base URL and embeddings as the ``openai`` provider. Request
    options go into the body as given (``reasoning={"effort": "low"}``, ``store=False``...);
    ``max_tokens`` is sent as ``max_output_tokens``.
    """

    name: ClassVar[str] = "openai_responses"
    replays_raw_replies: ClassVar[bool] = True

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request``."""
        body: dict[str, Any] = {"model": request.model, "input": to_responses_input(request)}
        body.update(self._fields(request, stream=stream))  # options may override
        return body

    def wire_body(self, request: ModelRequest, *, stream: bool) -> bytes:
        """:meth:`body` as the JSON bytes sent, each message of a growing conversation rendered
        and encoded once (see :mod:`lionagi.service.providers._encoded`)."""
        fields = self._fields(request, stream=stream)
        if "input" in fields:  # rare: the options set the input themselves
            return dumps(self.body(request, stream=stream))
        return wire_body(request.messages, _INPUT, "input", lambda _: fields)

    def _fields(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """Every field of the body but the input."""
        body: dict[str, Any] = {"model": request.model}
        if request.tools:
            body["tools"] = [_as_responses_tool(tool) for tool in request.tools]
        if request.response_format is not None:
            schema = request.response_format
            title = schema.get("title")
            name = _SCHEMA_NAME.sub("_", title)[:64] if isinstance(title, str) else ""
            body["text"] = {
                "format": {"type": "json_schema", "name": name or "response", "schema": schema}
            }
        options = dict(request.options)
        if "max_tokens" in options and "max_output_tokens" not in options:
            options["max_output_tokens"] = options.pop("max_tokens")
        body.update(options)
        drop_tool_settings(body, TOOL_SETTINGS)
        if stream:
            body["stream"] = True
        else:
            body.pop("stream", None)
        return body

    # -- whole replies -----------------------------------------------------------------
    async def invoke(self, request: ModelRequest) -> ModelResponse:
        data = await self.post_json("/responses", self.wire_body(request, stream=False))
        return self._reply(data)

    def _reply(self, data: Any) -> ModelResponse:
        output = self._output(data)
        text: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[Reasoning] = []
        for item in output:
            if not isinstance(item, dict):
                raise self.protocol_error(f"malformed output item: {preview(item)}")
            kind = item.get("type")
            if kind == "message":
                text.extend(_message_text(item))
            elif kind == "function_call":
                calls.append(self._function_call(item))
            elif kind == "reasoning" and (thought := _reasoning_text(item)):
                reasoning.append(Reasoning(format=_FORMAT, text=thought))
            # the items themselves (and other item types) travel in raw
        incomplete = data.get("incomplete_details")
        reason = incomplete.get("reason") if isinstance(incomplete, dict) else None
        return ModelResponse(
            text="".join(text),
            tool_calls=tuple(calls),
            reasoning=tuple(reasoning),
            usage=self._usage(data.get("usage")),
            model=data.get("model") or self.model,
            provider=self.name,
            finish_reason=reason or ("tool_calls" if calls else data.get("status")),
            raw=data,
        )

    def _output(self, data: Any) -> list[Any]:
        """The output items of a response object, which must have completed."""
        if not isinstance(data, dict):
            raise self.protocol_error(f"expected a JSON object, got {preview(data)}")
        if data.get("error") and data.get("status") != "completed":
            raise self._failed(data)
        output = data.get("output")
        if not isinstance(output, list):
            raise self.protocol_error(f"answer has no output items: {preview(data)}")
        return output

    def _function_call(self, item: Mapping[str, Any]) -> ToolCall:
        call_id = item.get("call_id") or item.get("id")
        arguments = item.get("arguments")
        if not isinstance(call_id, str) or not isinstance(arguments, str):
            raise self.protocol_error(f"malformed function call: {preview(item)}")
        partial = _PartialCall(id=call_id, name=str(item.get("name") or ""), arguments=arguments)
        return self._tool_call(partial)

    def _failed(self, data: Mapping[str, Any]) -> ProviderError:
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        detail = self._scrub(str(message or "the response failed"))
        where = f" ({code})" if code else ""
        return ServerError(f"{detail}{where}", provider=self.name, model=self.model)

    def _usage(self, raw: Any) -> Usage:
        return openai_usage(raw, given="input", produced="output")

    # -- streams -----------------------------------------------------------------------
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Typed ``response.*`` events as chunks; the final one carries the whole response
        (output items included, so reasoning survives a streamed turn too)."""
        body = self.wire_body(request, stream=True)
        final: ModelResponse | None = None
        parts = _ReasoningParts()
        async with aclosing(self.post_sse("/responses", body)) as events:
            async for event in events:
                data = self.event_json(event.data)
                kind = data.get("type") or event.event
                if kind in ("response.completed", "response.incomplete"):
                    final = self._reply(data.get("response"))
                    break
                if kind in _REASONING_DELTAS:
                    thought = parts.delta(data, _REASONING_DELTAS[kind])
                    if thought is not None:
                        yield thought
                    continue
                read = _EVENTS.get(kind)
                # created, in_progress, content_part.*, *.done, summary parts: nothing new
                chunk = None if read is None else read(self, data)
                if chunk is not None:
                    yield chunk
        if final is None:
            raise self.protocol_error("the stream ended before the response was complete")
        yield UsageChunk(usage=final.usage)
        yield FinalChunk(response=final)

    def _text_delta(self, data: Mapping[str, Any]) -> StreamChunk | None:
        delta = data.get("delta")
        return TextDelta(text=delta) if isinstance(delta, str) and delta else None

    def _item_added(self, data: Mapping[str, Any]) -> StreamChunk | None:
        item = data.get("item")
        if not isinstance(item, dict) or item.get("type") != "function_call":
            return None
        return ToolCallDelta(
            index=as_int(data.get("output_index")),
            id=item.get("call_id") or None,
            name=item.get("name") or None,
            arguments=str(item.get("arguments") or ""),
        )

    def _arguments_delta(self, data: Mapping[str, Any]) -> StreamChunk | None:
        delta = data.get("delta")
        if not isinstance(delta, str) or not delta:
            return None
        return ToolCallDelta(index=as_int(data.get("output_index")), arguments=delta)

    def _response_failed(self, data: Mapping[str, Any]) -> StreamChunk | None:
        response = data.get("response")
        raise self._failed(response if isinstance(response, dict) else data)

    def _error_event(self, data: Mapping[str, Any]) -> StreamChunk | None:
        raise self._payload_error({"error": data})


_EventReader: TypeAlias = Callable[[OpenAIResponsesProvider, Mapping[str, Any]], StreamChunk | None]

#: the stream events that carry something new, by type
_EVENTS: dict[str, _EventReader] = {
    "response.output_text.delta": OpenAIResponsesProvider._text_delta,
    "response.output_item.added": OpenAIResponsesProvider._item_added,
    "response.function_call_arguments.delta": OpenAIResponsesProvider._arguments_delta,
    "response.failed": OpenAIResponsesProvider._response_failed,
    "error": OpenAIResponsesProvider._error_event,
}


#: reasoning delta events, by type -> the index field naming the part they grow
_REASONING_DELTAS = {
    "response.reasoning_text.delta": "content_index",
    "response.reasoning_summary_text.delta": "summary_index",
}


class _ReasoningParts:
    """Streamed reasoning pieces, each begun with a blank line when it starts a later part of
    its item, so the deltas of an item spell :func:`_reasoning_text` of it."""

    __slots__ = ("_last", "_texted")

    def __init__(self) -> None:
        self._last: tuple[Any, str, Any] | None = None  # (item, kind of part, part index)
        self._texted: set[Any] = set()  # items some text was streamed for

    def delta(self, data: Mapping[str, Any], index_field: str) -> ReasoningDelta | None:
        piece = data.get("delta")
        if not isinstance(piece, str) or not piece:
            return None
        item = data.get("item_id", data.get("output_index"))
        part = (item, index_field, data.get(index_field))
        if part != self._last and item in self._texted:
            piece = _PART_BREAK + piece
        self._last = part
        self._texted.add(item)
        return ReasoningDelta(text=piece)


def _reasoning_text(item: Mapping[str, Any]) -> str:
    """The readable text of a reasoning item: its reasoning text, then its summary parts."""
    pieces = [
        part.get("text")
        for field in ("content", "summary")
        for part in (item.get(field) or ())
        if isinstance(part, dict)
    ]
    return _PART_BREAK.join(p for p in pieces if isinstance(p, str) and p)


# -- rendering -----------------------------------------------------------------------------
def to_responses_input(request: ModelRequest) -> list[dict[str, Any]]:
    """``request.messages`` as Responses API input items.

    An assistant message recorded from a Responses reply is sent back as that reply's output
    items (reasoning included), and the tool calls it made are not repeated; other assistant
    messages and tool calls are rendered as ``message`` and ``function_call`` items. A tool call
    without a result gets an error result.
    """
    items: list[dict[str, Any]] = _INPUT.render(request.messages, _INPUT.initial_state)[0]
    return items


class _ResponsesFormat(WireFormat):
    """Responses input items. The state carried across messages is the set of call ids
    already sent inside replayed output items (a later tool call with one is not repeated)."""

    initial_state: frozenset[str] = frozenset()

    def render(
        self, messages: Sequence[Message], state: frozenset[str]
    ) -> tuple[list[Any], frozenset[str]]:
        items: list[dict[str, Any]] = []
        replayed = set(state)
        for message in complete_tool_calls(messages):
            items.extend(_items(message, replayed))
        return items, frozenset(replayed)


_INPUT = _ResponsesFormat("openai_responses:encoded-prefix")


def _items(message: Message, replayed: set[str]) -> list[dict[str, Any]]:
    render = _RENDERERS.get(type(message))
    return [] if render is None else render(message, replayed)


def _system_items(message: System, replayed: set[str]) -> list[dict[str, Any]]:
    return [{"role": "system", "content": message.content}]


def _instruction_items(message: Instruction, replayed: set[str]) -> list[dict[str, Any]]:
    text = message.render_text()
    if not message.images:
        return [{"role": "user", "content": text}]
    content: list[dict[str, Any]] = [{"type": "input_text", "text": text}] if text else []
    content.extend({"type": "input_image", "image_url": url} for url in message.images)
    return [{"role": "user", "content": content}]


def _assistant_items(message: AssistantResponse, replayed: set[str]) -> list[dict[str, Any]]:
    output = _output_items(message.raw)
    if output is not None:
        replayed.update(
            str(item["call_id"]) for item in output if item.get("type") == "function_call"
        )
        return output
    return [{"role": "assistant", "content": message.content}] if message.content else []


def _request_items(message: ActionRequest, replayed: set[str]) -> list[dict[str, Any]]:
    if message.call_id in replayed:
        return []
    return [
        {
            "type": "function_call",
            "call_id": message.call_id,
            "name": message.function,
            "arguments": json.dumps(message.arguments, ensure_ascii=False),
        }
    ]


def _result_items(message: ActionResponse, replayed: set[str]) -> list[dict[str, Any]]:
    result = message.output
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    return [{"type": "function_call_output", "call_id": message.call_id, "output": text}]


_RENDERERS: dict[type, Callable[[Any, set[str]], list[dict[str, Any]]]] = {
    System: _system_items,
    Instruction: _instruction_items,
    AssistantResponse: _assistant_items,
    ActionRequest: _request_items,
    ActionResponse: _result_items,
}


def _output_items(raw: Any) -> list[dict[str, Any]] | None:
    """The output items of a recorded Responses reply, ready to send back (or ``None``)."""
    if not isinstance(raw, dict) or raw.get("object") != "response":
        return None
    output = raw.get("output")
    if not isinstance(output, list):
        return None
    return [dict(item) for item in output if isinstance(item, dict) and item.get("type")]


def _message_text(item: Mapping[str, Any]) -> list[str]:
    content = item.get("content")
    if not isinstance(content, list):
        return []
    return [
        str(part.get("text", ""))
        for part in content
        if isinstance(part, dict) and part.get("type") == "output_text"
    ]


def _as_responses_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool in the Responses API's flat function shape."""
    entry: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description:
        entry["description"] = tool.description
    entry["parameters"] = tool.parameters
    return entry
