"""Rendering a request as an OpenAI chat-completions body (the wire format every
OpenAI-compatible server reads): messages, tools, structured output, options."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lionagi.errors import ConfigurationError
from lionagi.protocols._render import (
    complete_tool_calls,
    instruction_text,
    output_text,
    render_cache,
    schema_instruction,
    schema_is_asked,
)
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
)
from lionagi.protocols.tool_spec import ToolSpec
from lionagi.service._options import apply_options, drop_tool_settings
from lionagi.service.providers._encoded import WireFormat, dumps, wire_body

if TYPE_CHECKING:
    from lionagi.service.types import ModelRequest

__all__ = ["TOOL_SETTINGS", "openai_body", "openai_tool", "openai_wire_body", "to_openai_messages"]

TOOL_SETTINGS = ("tool_choice", "parallel_tool_calls")
"""Body fields that only mean something beside ``tools`` (dropped from a body without them)."""

_OPENAI = "openai"
_OPENAI_BARE = "openai:schema-sent-natively"  # an instruction whose schema goes in the body
_OPENAI_PREFIX = "openai:encoded-prefix"  # a conversation's encoded prefix, on its first message
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def openai_body(request: ModelRequest, *, stream: bool, provider: str) -> dict[str, Any]:
    """The chat-completions body for ``request``.

    Structured output follows ``request.structured_output``: ``"json_schema"`` sends the schema
    as ``response_format`` (and not again in the prompt), ``"json_object"`` asks for a JSON
    object and puts the schema in the prompt, ``"prompt"`` puts it in the prompt only.
    """
    native = _native_schema(request)
    messages = to_openai_messages(request.messages, native_schema=native)
    schema = request.response_format
    if schema is not None and native is None and not schema_is_asked(request.messages, schema):
        messages = _with_system_note(messages, schema_instruction(schema))
    return {"messages": messages, **_fields(request, stream=stream, provider=provider)}


def openai_wire_body(request: ModelRequest, *, stream: bool, provider: str) -> bytes:
    """:func:`openai_body` encoded as JSON, assembled from the conversation's encoded prefix
    (see :mod:`~lionagi.service.providers._encoded`): the same JSON value, with each message
    rendered and encoded once over the conversation's requests."""
    fields = _fields(request, stream=stream, provider=provider)
    native = _native_schema(request)
    if "messages" in fields or (request.response_format is not None and native is None):
        return dumps(openai_body(request, stream=stream, provider=provider))  # rare shapes
    return wire_body(request.messages, _OpenAIFormat(native), "messages", lambda _: fields)


class _OpenAIFormat(WireFormat):
    """Chat-completions messages; ``settings`` is the schema the body sends natively."""

    def __init__(self, native: dict[str, Any] | None) -> None:
        super().__init__(_OPENAI_PREFIX, native)

    def render(self, messages: Sequence[Message], state: Any) -> tuple[list[Any], Any]:
        return to_openai_messages(messages, native_schema=self.settings), None


def _native_schema(request: ModelRequest) -> dict[str, Any] | None:
    """The schema the body sends as ``response_format`` (``None``: none, or in the prompt)."""
    return request.response_format if request.structured_output == "json_schema" else None


def _fields(request: ModelRequest, *, stream: bool, provider: str) -> dict[str, Any]:
    """Every field of the body but the messages."""
    body: dict[str, Any] = {"model": request.model}
    if request.tools:
        body["tools"] = [openai_tool(tool) for tool in request.tools]
    schema = request.response_format
    if schema is not None and (response_format := _response_format(request, schema)):
        body["response_format"] = response_format
    apply_options(body, request.options, provider=provider, renames={}, refused={})
    drop_tool_settings(body, TOOL_SETTINGS)
    _set_streaming(body, stream)
    return body


def _response_format(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` entry that asks for ``schema`` (``None``: asked in the prompt)."""
    if request.structured_output == "json_schema":
        title = schema.get("title")
        name = _SCHEMA_NAME.sub("_", title)[:64] if isinstance(title, str) else ""
        return {
            "type": "json_schema",
            "json_schema": {"name": name or "response", "schema": schema},
        }
    if request.structured_output == "json_object":
        return {"type": "json_object"}
    return None


def _set_streaming(body: dict[str, Any], stream: bool) -> None:
    """Streaming on (usage included) or off, whatever the options said."""
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    else:
        body.pop("stream", None)
        body.pop("stream_options", None)


def _with_system_note(messages: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """``messages`` with ``note`` added to the system message (one made if there is none)."""
    if (
        messages
        and messages[0].get("role") == "system"
        and isinstance(messages[0].get("content"), str)
    ):
        first = {**messages[0], "content": f"{messages[0]['content']}\n\n{note}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def _openai_part(message: Message, *, bare: bool = False) -> dict[str, Any]:
    """The memoized OpenAI form of one message (a tool-call entry for an ActionRequest);
    ``bare``: an instruction without the schema paragraph (the body carries the schema)."""
    key = _OPENAI_BARE if bare else _OPENAI
    cached = render_cache(message).get(key)
    if cached is not None:
        part: dict[str, Any] = cached
        return part
    part = _render_part(message, bare=bare)
    render_cache(message)[key] = part
    return part


def _render_part(message: Message, *, bare: bool) -> dict[str, Any]:
    if isinstance(message, System):
        return {"role": "system", "content": message.content}
    if isinstance(message, Instruction):
        return _instruction_part(message, bare=bare)
    if isinstance(message, AssistantResponse):
        return {"role": "assistant", "content": message.content}
    if isinstance(message, ActionRequest):
        return {
            **message.provider_fields,
            "id": message.call_id,
            "type": "function",
            "function": {
                "name": message.function,
                "arguments": json.dumps(message.arguments, ensure_ascii=False),
            },
        }
    if isinstance(message, ActionResponse):
        return {
            "role": "tool",
            "tool_call_id": message.call_id,
            "content": output_text(message.output),
        }
    raise ConfigurationError(f"cannot render a {type(message).__name__} message")


def _instruction_part(message: Instruction, *, bare: bool) -> dict[str, Any]:
    text = instruction_text(message, with_schema=not bare)
    if not message.images:
        return {"role": "user", "content": text}
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.extend({"type": "image_url", "image_url": {"url": url}} for url in message.images)
    return {"role": "user", "content": content}


def to_openai_messages(
    messages: Sequence[Message], *, native_schema: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Render ``messages`` as OpenAI chat-completions messages.

    Action requests that directly follow an assistant message (or each other) become that
    assistant message's ``tool_calls``; one with no assistant message before it opens an
    assistant message with empty ``content`` (a string: llama.cpp's server and others reject
    ``null``). A tool call without a result gets an error result. Instructions asking for
    ``native_schema`` leave it out of their text, since the body sends it.
    """
    messages = complete_tool_calls(messages)
    out: list[dict[str, Any]] = []
    # the assistant dict at out[-1] that this render built itself and may extend
    owned: dict[str, Any] | None = None
    previous: Message | None = None
    for message in messages:
        bare = (
            native_schema is not None
            and isinstance(message, Instruction)
            and message.response_format == native_schema
        )
        part = _openai_part(message, bare=bare)
        if isinstance(message, ActionRequest):
            if owned is not None and out and out[-1] is owned:
                owned["tool_calls"].append(part)
            elif isinstance(previous, AssistantResponse):
                owned = {**out[-1], "tool_calls": [part]}
                out[-1] = owned
            else:
                owned = {"role": "assistant", "content": "", "tool_calls": [part]}
                out.append(owned)
        else:
            out.append(part)
        previous = message
    return out


def openai_tool(spec: ToolSpec) -> dict[str, Any]:
    """``spec`` as an OpenAI ``tools`` entry."""
    return spec.function_schema()
