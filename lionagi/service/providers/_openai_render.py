"""Rendering a history as OpenAI chat-completions messages and tools (the wire format every
OpenAI-compatible server reads)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lionagi.errors import ConfigurationError
from lionagi.protocols._render import (
    complete_tool_calls,
    instruction_text,
    output_text,
    render_cache,
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

__all__ = ["openai_tool", "to_openai_messages"]

_OPENAI = "openai"


def _openai_part(message: Message) -> dict[str, Any]:
    """The memoized OpenAI form of one message (a tool-call entry for an ActionRequest)."""
    cached = render_cache(message).get(_OPENAI)
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
            "content": output_text(message.output),
        }
    else:
        raise ConfigurationError(f"cannot render a {type(message).__name__} message")
    render_cache(message)[_OPENAI] = part
    return part


def to_openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Render ``messages`` as OpenAI chat-completions messages.

    Action requests that directly follow an assistant message (or each other) become that
    assistant message's ``tool_calls``; one with no assistant message before it opens an
    assistant message with ``content`` None. A tool call without a result gets an error result.
    """
    messages = complete_tool_calls(messages)
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


def openai_tool(spec: ToolSpec) -> dict[str, Any]:
    """``spec`` as an OpenAI ``tools`` entry."""
    return spec.function_schema()
