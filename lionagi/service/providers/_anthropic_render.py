"""Rendering a history as Anthropic Messages content blocks and tools."""

from __future__ import annotations

import re
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

__all__ = ["anthropic_tool", "to_anthropic_messages"]

_ANTHROPIC = "anthropic"
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
    cached = render_cache(message).get(_ANTHROPIC)
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
                "content": output_text(message.output),
                "is_error": message.is_error,
            }
        ]
    else:
        raise ConfigurationError(f"cannot render a {type(message).__name__} message")
    render_cache(message)[_ANTHROPIC] = (role, blocks)
    return role, blocks


def to_anthropic_messages(
    messages: Sequence[Message],
) -> tuple[str | None, list[dict[str, Any]]]:
    """Render ``messages`` as Anthropic Messages: ``(system text, messages)``.

    System messages become the separate system text; consecutive messages of the same role
    are merged into one, so roles alternate as the API requires. A tool call without a result
    gets an error result.
    """
    messages = complete_tool_calls(messages)
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


def anthropic_tool(spec: ToolSpec) -> dict[str, Any]:
    """``spec`` as an Anthropic ``tools`` entry."""
    entry: dict[str, Any] = {"name": spec.name}
    if spec.description:
        entry["description"] = spec.description
    entry["input_schema"] = spec.parameters
    return entry
