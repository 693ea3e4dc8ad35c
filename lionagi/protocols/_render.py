"""Rendering a conversation history into provider request messages.

Pure functions over immutable messages. Each message's wire part is memoized in its
``_render_cache`` under the format name, so re-rendering a long history costs one lookup per
message. Cached parts are shared between renders and never mutated: where a render folds or
merges parts, it builds fresh top-level dicts and lists.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
)

__all__ = [
    "instruction_text",
    "openai_tools_to_anthropic",
    "schema_instruction",
    "to_anthropic_messages",
    "to_openai_messages",
]

_OPENAI = "openai"
_ANTHROPIC = "anthropic"
_TEXT = "text"


def _cache(message: Message) -> dict[str, Any]:
    """``message._render_cache``, read without pydantic's ``__getattr__`` (the main cost of
    re-rendering a long history otherwise)."""
    private = message.__pydantic_private__
    cache: dict[str, Any] = (
        private["_render_cache"] if private is not None else message._render_cache
    )
    return cache


def schema_instruction(schema: Mapping[str, Any]) -> str:
    """The paragraph asking a model for one JSON object that follows ``schema``."""
    compact = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    return (
        "Respond with a single JSON object, and nothing else, that follows this JSON schema:\n"
        f"{compact}"
    )


def tools_instruction(tool_schemas: Sequence[Mapping[str, Any]]) -> str:
    """The paragraph listing the tools a model may request in its JSON answer (for models
    without native tool calling); native tools are sent in the request instead."""
    lines = ["Tools you may request (put calls in `action_requests`):"]
    for schema in tool_schemas:
        function = schema.get("function", schema)
        name = function.get("name", "?")
        description = function.get("description") or ""
        parameters = json.dumps(
            function.get("parameters", {}), separators=(",", ":"), ensure_ascii=False
        )
        lines.append(f"- {name}: {description} parameters: {parameters}".replace("  ", " "))
    return "\n".join(lines)


def instruction_text(ins: Instruction) -> str:
    """The text a user turn carries: instruction, guidance, context and the schema request."""
    cached = _cache(ins).get(_TEXT)
    if cached is not None:
        return str(cached)
    parts: list[str] = []
    if ins.instruction:
        parts.append(ins.instruction)
    if ins.guidance:
        parts.append(f"Guidance: {ins.guidance}")
    if ins.context is not None:
        context = (
            ins.context
            if isinstance(ins.context, str)
            else json.dumps(ins.context, indent=2, ensure_ascii=False)
        )
        parts.append(f"Context:\n{context}")
    if ins.tool_schemas:
        parts.append(tools_instruction(ins.tool_schemas))
    if ins.response_format is not None:
        parts.append(schema_instruction(ins.response_format))
    text = "\n\n".join(parts)
    _cache(ins)[_TEXT] = text
    return text


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


# -- unanswered tool calls -------------------------------------------------------------

_NO_RESULT = "error: no result -- the call was interrupted before it completed"


def _complete_tool_calls(messages: Sequence[Message]) -> Sequence[Message]:
    """``messages`` with an error result after each tool call that has none.

    A turn cancelled between a tool call and its result leaves a call without an answer in the
    history (nothing is rolled back). Providers reject such a conversation, so rendering adds a
    request-only error result where the call's results belong; the history is untouched.
    """
    answered = {m.call_id for m in messages if isinstance(m, ActionResponse)}
    if all(m.call_id in answered for m in messages if isinstance(m, ActionRequest)):
        return messages
    out: list[Message] = []
    pending: list[ActionRequest] = []
    for message in messages:
        if not isinstance(message, ActionRequest | ActionResponse) and pending:
            out.extend(_missing_result(request) for request in pending)
            pending = []
        if isinstance(message, ActionRequest) and message.call_id not in answered:
            pending.append(message)
        out.append(message)
    out.extend(_missing_result(request) for request in pending)
    return out


def _missing_result(request: ActionRequest) -> ActionResponse:
    return ActionResponse(
        request_id=request.id,
        call_id=request.call_id,
        function=request.function,
        output=_NO_RESULT,
        is_error=True,
    )


# -- OpenAI chat completions -------------------------------------------------------------


def _openai_part(message: Message) -> dict[str, Any]:
    """The memoized OpenAI form of one message (a tool-call entry for an ActionRequest)."""
    cached = _cache(message).get(_OPENAI)
    if cached is not None:
        part: dict[str, Any] = cached
        return part
    if isinstance(message, System):
        part = {"role": "system", "content": message.content}
    elif isinstance(message, Instruction):
        text = instruction_text(message)
        if message.images:
            content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            content.extend(
                {"type": "image_url", "image_url": {"url": url}} for url in message.images
            )
            part = {"role": "user", "content": content}
        else:
            part = {"role": "user", "content": text}
    elif isinstance(message, AssistantResponse):
        part = {"role": "assistant", "content": message.content}
    elif isinstance(message, ActionRequest):
        part = {
            "id": message.call_id,
            "type": "function",
            "function": {
                "name": message.function,
                "arguments": json.dumps(message.arguments, ensure_ascii=False),
            },
        }
    elif isinstance(message, ActionResponse):
        part = {
            "role": "tool",
            "tool_call_id": message.call_id,
            "content": _output_text(message.output),
        }
    else:
        raise ConfigurationError(f"cannot render a {type(message).__name__} message")
    _cache(message)[_OPENAI] = part
    return part


def to_openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Render ``messages`` as OpenAI chat-completions messages.

    Action requests that directly follow an assistant message (or each other) become that
    assistant message's ``tool_calls``; one with no assistant message before it opens an
    assistant message with ``content`` None. A tool call without a result gets an error result.
    """
    messages = _complete_tool_calls(messages)
    out: list[dict[str, Any]] = []
    # the assistant dict at out[-1] that this render built itself and may extend
    owned: dict[str, Any] | None = None
    previous: Message | None = None
    for message in messages:
        part = _openai_part(message)
        if isinstance(message, ActionRequest):
            if owned is not None and out and out[-1] is owned:
                owned["tool_calls"].append(part)
            elif isinstance(previous, AssistantResponse):
                owned = {**out[-1], "tool_calls": [part]}
                out[-1] = owned
            else:
                owned = {"role": "assistant", "content": None, "tool_calls": [part]}
                out.append(owned)
        else:
            out.append(part)
        previous = message
    return out


# -- Anthropic Messages ------------------------------------------------------------------

_DATA_URL = re.compile(r"^data:(?P<media>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)


def _anthropic_image(url: str) -> dict[str, Any]:
    if url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    match = _DATA_URL.match(url)
    if match is None:
        raise ConfigurationError(
            f"image {url[:60]!r} is neither an http(s) URL nor a base64 data: URL "
            "(data:<media type>;base64,<data>)"
        )
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": match["media"], "data": match["data"]},
    }


def _anthropic_part(message: Message) -> tuple[str, list[dict[str, Any]]]:
    """The memoized (role, content blocks) of one message; system text for a System."""
    cached = _cache(message).get(_ANTHROPIC)
    if cached is not None:
        role_blocks: tuple[str, list[dict[str, Any]]] = cached
        return role_blocks
    blocks: list[dict[str, Any]]
    if isinstance(message, System):
        role, blocks = "system", [{"type": "text", "text": message.content}]
    elif isinstance(message, Instruction):
        text = instruction_text(message)
        blocks = [_anthropic_image(url) for url in message.images]
        if text:
            blocks.append({"type": "text", "text": text})
        role = "user"
    elif isinstance(message, AssistantResponse):
        role = "assistant"
        blocks = [{"type": "text", "text": message.content}] if message.content else []
    elif isinstance(message, ActionRequest):
        role = "assistant"
        blocks = [
            {
                "type": "tool_use",
                "id": message.call_id,
                "name": message.function,
                "input": message.arguments,
            }
        ]
    elif isinstance(message, ActionResponse):
        role = "user"
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": message.call_id,
                "content": _output_text(message.output),
                "is_error": message.is_error,
            }
        ]
    else:
        raise ConfigurationError(f"cannot render a {type(message).__name__} message")
    _cache(message)[_ANTHROPIC] = (role, blocks)
    return role, blocks


def to_anthropic_messages(
    messages: Sequence[Message],
) -> tuple[str | None, list[dict[str, Any]]]:
    """Render ``messages`` as Anthropic Messages: ``(system text, messages)``.

    System messages become the separate system text; consecutive messages of the same role
    are merged into one, so roles alternate as the API requires. A tool call without a result
    gets an error result.
    """
    messages = _complete_tool_calls(messages)
    system: list[str] = []
    out: list[dict[str, Any]] = []
    owned: dict[str, Any] | None = None  # merged dict at out[-1] built by this render
    for message in messages:
        role, blocks = _anthropic_part(message)
        if role == "system":
            system.append(blocks[0]["text"])
            continue
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            if owned is not None and out[-1] is owned:
                owned["content"].extend(blocks)
            else:
                owned = {"role": role, "content": [*out[-1]["content"], *blocks]}
                out[-1] = owned
        else:
            out.append({"role": role, "content": blocks})
    return ("\n\n".join(system) if system else None), out


def openai_tools_to_anthropic(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Convert OpenAI function schemas (wrapped in ``{"function": ...}`` or bare) for Anthropic."""
    converted: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function", tool)
        if not isinstance(function, Mapping) or not function.get("name"):
            raise ConfigurationError(f"tool schema without a function name: {tool!r}")
        entry: dict[str, Any] = {"name": function["name"]}
        if function.get("description"):
            entry["description"] = function["description"]
        entry["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
        converted.append(entry)
    return converted
