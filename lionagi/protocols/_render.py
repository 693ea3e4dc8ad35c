"""What every provider's rendering of a history shares, independent of any wire format.

The text a user turn carries (instruction, guidance, context, tool list, schema request), the
request-only results for tool calls left unanswered, and the per-message render cache. Wire
formats live with their providers (``lionagi.service.providers``): each memoizes a message's
wire part in :func:`render_cache` under its format name, so re-rendering a long history costs
one lookup per message. Cached parts are shared between renders and never mutated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    Instruction,
    Message,
)
from lionagi.protocols.tool_spec import ToolSpec

__all__ = [
    "complete_tool_calls",
    "instruction_text",
    "output_text",
    "render_cache",
    "schema_instruction",
    "schema_is_asked",
    "tools_instruction",
]

_TEXT = "text"
_BARE_TEXT = "text:no-schema"


def render_cache(message: Message) -> dict[str, Any]:
    """``message._render_cache``: the message's render cache, made on first use."""
    return message._render_cache


def schema_instruction(schema: Mapping[str, Any]) -> str:
    """The paragraph asking a model for one JSON object that follows ``schema``."""
    compact = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    return (
        "Respond with a single JSON object, and nothing else, that follows this JSON schema:\n"
        f"{compact}"
    )


def schema_is_asked(messages: Sequence[Message], schema: Mapping[str, Any] | None) -> bool:
    """Whether an instruction of ``messages`` already asks for ``schema`` in its text."""
    return schema is not None and any(
        isinstance(m, Instruction) and m.response_format == schema for m in messages
    )


def tools_instruction(tool_schemas: Sequence[ToolSpec | Mapping[str, Any]]) -> str:
    """The paragraph listing the tools a model may request in its JSON answer (for models
    without native tool calling); native tools are sent in the request instead."""
    lines = ["Tools you may request (put calls in `action_requests`):"]
    for schema in tool_schemas:
        spec = ToolSpec.of(schema)
        parameters = json.dumps(spec.parameters, separators=(",", ":"), ensure_ascii=False)
        line = f"- {spec.name}: {spec.description} parameters: {parameters}"
        lines.append(line.replace("  ", " "))
    return "\n".join(lines)


def instruction_text(ins: Instruction, *, with_schema: bool = True) -> str:
    """The text a user turn carries: instruction, guidance, context and (unless the request
    sends the schema natively, ``with_schema=False``) the schema request."""
    key = _TEXT if with_schema else _BARE_TEXT
    cached = render_cache(ins).get(key)
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
    if ins.response_format is not None and with_schema:
        parts.append(schema_instruction(ins.response_format))
    text = "\n\n".join(parts)
    render_cache(ins)[key] = text
    return text


def output_text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


# -- unanswered tool calls -------------------------------------------------------------

_NO_RESULT = "error: no result -- the call was interrupted before it completed"


def complete_tool_calls(messages: Sequence[Message]) -> Sequence[Message]:
    """``messages`` with an error result after each tool call that has none.

    A turn cancelled between a tool call and its result leaves a call without an answer in the
    history (nothing is rolled back). Providers reject such a conversation, so rendering adds a
    request-only error result where the call's results belong; the history is untouched.
    """
    answered = {m.call_id for m in messages if isinstance(m, ActionResponse)}
    if all(m.call_id in answered for m in messages if isinstance(m, ActionRequest)):
        return messages
    return _with_missing_results(messages, answered)


def _with_missing_results(messages: Sequence[Message], answered: set[str]) -> list[Message]:
    """``messages`` with an error result after each run of tool messages, for each call of
    the run that ``answered`` lacks."""
    out: list[Message] = []
    pending: list[ActionRequest] = []
    for message in messages:
        if not isinstance(message, ActionRequest | ActionResponse) and pending:
            out.extend(map(_missing_result, pending))
            pending = []
        if isinstance(message, ActionRequest) and message.call_id not in answered:
            pending.append(message)
        out.append(message)
    out.extend(map(_missing_result, pending))
    return out


def _missing_result(request: ActionRequest) -> ActionResponse:
    return ActionResponse(
        request_id=request.id,
        call_id=request.call_id,
        function=request.function,
        output=_NO_RESULT,
        is_error=True,
    )
