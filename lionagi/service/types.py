"""What goes to a provider and what comes back, independent of any wire format."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from lionagi.protocols.messages import Message, ToolCall, Usage
from lionagi.protocols.tool_spec import ToolSpec

__all__ = [
    "FinalChunk",
    "ModelRequest",
    "ModelResponse",
    "StreamChunk",
    "TextDelta",
    "ToolCallDelta",
    "ToolResultEvent",
    "UsageChunk",
]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    r"""One request to a provider.

    ``messages`` is the conversation to send, system first. Providers render it to their wire
    format and must treat it as read-only. ``tools`` are neutral :class:`ToolSpec`\ s;
    ``response_format`` a JSON schema (with a ``title``) the reply should follow.
    """

    model: str
    messages: Sequence[Message]
    tools: tuple[ToolSpec, ...] = ()
    response_format: dict[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    session_id: str | None = None


class ModelResponse(BaseModel):
    """A complete model reply.

    ``attempts`` is how many requests the call sent to get it (retries included);
    ``provider``/``model`` name the model that answered (a fallback model, when one did).
    """

    model_config = ConfigDict(frozen=True)

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
    provider: str | None = None
    finish_reason: str | None = None
    session_id: str | None = None
    raw: JsonValue = None
    attempts: int = 1


class TextDelta(BaseModel):
    """A piece of reply text. ``complete=True`` marks the end of one text block (agentic CLIs
    send whole blocks), so a consumer can commit the text gathered so far as one message."""

    model_config = ConfigDict(frozen=True, defer_build=True)  # built on the first stream
    type: Literal["text"] = "text"
    text: str
    complete: bool = False


class ToolCallDelta(BaseModel):
    """Part of a tool call. ``index`` groups deltas; ``id``/``name`` arrive once, ``arguments``
    is a fragment of the JSON argument text. A provider that receives whole tool calls sends one
    delta holding all of it."""

    model_config = ConfigDict(frozen=True, defer_build=True)  # built on the first stream
    type: Literal["tool_call"] = "tool_call"
    index: int = 0
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class ToolResultEvent(BaseModel):
    """A tool result produced on the provider's side (agentic CLIs run their own tools)."""

    model_config = ConfigDict(frozen=True, defer_build=True)  # built on the first stream
    type: Literal["tool_result"] = "tool_result"
    call_id: str
    output: JsonValue = None
    is_error: bool = False


class UsageChunk(BaseModel):
    """Usage reported during a stream."""

    model_config = ConfigDict(frozen=True, defer_build=True)  # built on the first stream
    type: Literal["usage"] = "usage"
    usage: Usage


class FinalChunk(BaseModel):
    """Last chunk of a stream: the assembled response."""

    model_config = ConfigDict(frozen=True, defer_build=True)  # built on the first stream
    type: Literal["final"] = "final"
    response: ModelResponse


StreamChunk: TypeAlias = TextDelta | ToolCallDelta | ToolResultEvent | UsageChunk | FinalChunk
