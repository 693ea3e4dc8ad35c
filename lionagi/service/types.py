"""What goes to a provider and what comes back, independent of any wire format."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, JsonValue
from pydantic.dataclasses import dataclass as _pydantic_dataclass

from lionagi._pydantic_methods import PydanticDataclassMethods
from lionagi.protocols.messages import Message, Reasoning, ToolCall, Usage, _refuse_assignment
from lionagi.protocols.tool_spec import ToolSpec

__all__ = [
    "STRUCTURED_OUTPUT_MODES",
    "FinalChunk",
    "ModelRequest",
    "ModelResponse",
    "ReasoningDelta",
    "ReasoningEvent",
    "StreamChunk",
    "StructuredOutput",
    "TextDelta",
    "ToolCallDelta",
    "ToolResultEvent",
    "UsageChunk",
]


StructuredOutput: TypeAlias = Literal["json_schema", "json_object", "prompt"]
"""How a ``response_format`` is asked for: ``"json_schema"`` sends the schema as the provider's
native structured-output setting (OpenAI ``response_format: json_schema``), ``"json_object"``
asks for any JSON object natively and states the schema in the prompt (servers such as
llama.cpp's that take only that), ``"prompt"`` states the schema in the prompt only. The schema
is sent once either way."""

STRUCTURED_OUTPUT_MODES: tuple[StructuredOutput, ...] = ("json_schema", "json_object", "prompt")


@dataclass(frozen=True, slots=True)
class ModelRequest:
    r"""One request to a provider.

    ``messages`` is the conversation to send, system first. Providers render it to their wire
    format and must treat it as read-only. ``tools`` are neutral :class:`ToolSpec`\ s;
    ``response_format`` a JSON schema (with a ``title``) the reply should follow, asked for as
    ``structured_output`` says (see :data:`StructuredOutput`).
    """

    model: str
    messages: Sequence[Message]
    tools: tuple[ToolSpec, ...] = ()
    response_format: dict[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    structured_output: StructuredOutput = "json_schema"


@_pydantic_dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse(PydanticDataclassMethods):
    """A complete model reply (immutable).

    ``finish_reason`` is the provider's own stop reason (``"stop"``, ``"length"``,
    ``"tool_calls"``, ``"end_turn"``, ``"max_tokens"``, ``"pause_turn"``...). ``refusal`` is the
    model's refusal text when it declined to answer. ``reasoning`` holds reasoning blocks the
    provider needs back in later requests. ``usage`` follows one convention for every
    provider: ``input_tokens`` is the whole prompt, of which ``cached_input_tokens`` were read
    from and ``cache_write_tokens`` written to a prompt cache.
    ``attempts`` is how many requests the call sent to get it (retries included);
    ``provider``/``model`` name the model that answered (a fallback model, when one did).

    A frozen slotted pydantic dataclass, as messages are: built and validated from keywords
    (unknown ones are ignored), equal by fields, with ``model_validate``, ``model_dump``,
    ``model_dump_json`` and ``model_copy``; an instance is only its field slots, so a Branch's
    log record keeps the reply itself. A subclass adding fields is declared with
    ``pydantic.dataclasses.dataclass`` too.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    refusal: str | None = None
    reasoning: tuple[Reasoning, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    provider: str | None = None
    finish_reason: str | None = None
    session_id: str | None = None
    raw: JsonValue = None
    attempts: int = 1


# Immutable as a frozen BaseModel is (and as messages are): assigning raises pydantic's
# frozen_instance error, not the dataclass's FrozenInstanceError. It hashes by its fields.
ModelResponse.__setattr__ = _refuse_assignment  # type: ignore[method-assign]
ModelResponse.__delattr__ = _refuse_assignment  # type: ignore[method-assign]


class _Chunk(BaseModel):
    """Base of the stream chunk types: immutable, their schemas built on the first stream."""

    model_config = ConfigDict(frozen=True, defer_build=True)


class TextDelta(_Chunk):
    """A piece of reply text. ``complete=True`` marks the end of one text block (agentic CLIs
    send whole blocks), so a consumer can commit the text gathered so far as one message."""

    type: Literal["text"] = "text"
    text: str
    complete: bool = False


class ToolCallDelta(_Chunk):
    """Part of a tool call. ``index`` groups deltas; ``id``/``name`` arrive once, ``arguments``
    is a fragment of the JSON argument text. A provider that receives whole tool calls sends one
    delta holding all of it. A provider that sends no call id gets one made up
    (``call_<index>``) on the first delta, so every delta and the final call agree.
    ``provider_fields`` are fields to send back with the call (see ``ToolCall``)."""

    type: Literal["tool_call"] = "tool_call"
    index: int = 0
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    provider_fields: dict[str, JsonValue] | None = None


class ToolResultEvent(_Chunk):
    """A tool result produced on the provider's side (agentic CLIs run their own tools)."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    output: JsonValue = None
    is_error: bool = False


class ReasoningDelta(_Chunk):
    """A piece of reasoning text as the provider streams it: Anthropic ``thinking_delta``,
    ``reasoning_content`` (or ``reasoning``) of OpenAI-compatible servers, Responses reasoning
    text and summary deltas. For live views only: the reasoning is recorded from the finished
    block (a :class:`ReasoningEvent`, or the final response), whose ``text`` is exactly the
    concatenation of its deltas. Signatures and encrypted content are never streamed."""

    type: Literal["reasoning_delta"] = "reasoning_delta"
    text: str


class ReasoningEvent(_Chunk):
    """A finished reasoning block (sent when the block ends, before what follows it)."""

    type: Literal["reasoning"] = "reasoning"
    reasoning: Reasoning


class UsageChunk(_Chunk):
    """Usage reported during a stream."""

    type: Literal["usage"] = "usage"
    usage: Usage


class FinalChunk(_Chunk):
    """Last chunk of a stream: the assembled response."""

    type: Literal["final"] = "final"
    response: ModelResponse


StreamChunk: TypeAlias = (
    TextDelta
    | ToolCallDelta
    | ToolResultEvent
    | ReasoningDelta
    | ReasoningEvent
    | UsageChunk
    | FinalChunk
)
