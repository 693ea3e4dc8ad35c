"""Live events of a streamed turn: what :meth:`Branch.stream` hands out as it happens.

A stream of events is the message view of :meth:`Branch.run` with the model's deltas
interleaved, in the order they arrived:

- :class:`TextDeltaEvent` -- a piece of reply text, handed out as the provider sends it;
- :class:`ReasoningDeltaEvent` -- a piece of the model's reasoning (thinking), as it streams;
- :class:`ToolCallDeltaEvent` -- a piece of a tool call (its id and name once, then fragments
  of its JSON argument text);
- :class:`ToolStarted` / :class:`ToolFinished` -- a tool call began running / its result is in;
- :class:`MessageCommitted` -- a message was recorded in the history (the item ``run`` yields);
- :class:`PartialObjectEvent` -- a structured reply so far, parsed from its partial JSON text
  (:meth:`Branch.operate_stream` and ``ReActEvents``);
- :class:`ResultEvent` -- what the operation returns (last), or what a ReAct round returned.

The deltas of a reply come before its message is committed, and an assistant reply's committed
text is exactly the concatenation of the text deltas since the previous committed message. A
turn that stops mid-reply has handed out deltas that no message holds: the history records
whole messages only. The classes are frozen dataclasses, so they work with ``match``::

    match event:
        case TextDeltaEvent(text=text):
            print(text, end="")
        case MessageCommitted(message=ActionResponse() as result):
            ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import BaseModel

from lionagi.protocols.messages import ActionRequest, ActionResponse, Message

__all__ = [
    "MessageCommitted",
    "PartialObjectEvent",
    "ReasoningDeltaEvent",
    "ResultEvent",
    "StreamEvent",
    "TextDeltaEvent",
    "ToolCallDeltaEvent",
    "ToolFinished",
    "ToolStarted",
]


@dataclass(frozen=True, slots=True)
class TextDeltaEvent:
    """A piece of the reply text, as the provider sent it (never empty)."""

    text: str


_new_event = object.__new__
_set_text = vars(TextDeltaEvent)["text"].__set__  # the slot's descriptor


def text_delta(text: str) -> TextDeltaEvent:
    """``TextDeltaEvent(text)`` without the frozen dataclass's ``__init__`` (the object is the
    same): a stream builds one per delta."""
    event: TextDeltaEvent = _new_event(TextDeltaEvent)
    _set_text(event, text)
    return event


@dataclass(frozen=True, slots=True)
class ReasoningDeltaEvent:
    """A piece of the model's reasoning, as the provider streamed it (never empty). The reply
    that follows commits it whole: the text of the committed message's ``reasoning`` blocks is
    the concatenation of the reasoning deltas since the previous committed message."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDeltaEvent:
    """A piece of tool call ``index`` of the current reply. ``call_id`` and ``name`` come with
    the call's first delta; ``arguments`` is a fragment of its JSON argument text (whole, for a
    provider that receives whole calls)."""

    index: int
    call_id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call began: the Branch is about to run it, or (an agentic CLI) the provider
    announced it runs it. Its :class:`ActionRequest` was committed before this event."""

    request: ActionRequest


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call's result is in; its :class:`ActionResponse` was committed before this
    event."""

    response: ActionResponse


@dataclass(frozen=True, slots=True)
class MessageCommitted:
    """A message was recorded in the Branch's history (what :meth:`Branch.run` yields)."""

    message: Message


@dataclass(frozen=True, slots=True)
class PartialObjectEvent:
    """A structured reply as far as it has arrived, after a text delta that changed it.

    ``data`` is the JSON object parsed from the reply text so far (an unfinished string value
    is kept as far as it goes). ``parsed`` is ``data`` validated into the requested model by
    pydantic's partial validation, or None while the object is not valid yet (a required field
    still missing). The committed reply is parsed and validated as a whole, as without
    streaming; a partial object is only a preview of it.
    """

    data: dict[str, Any]
    parsed: BaseModel | None


@dataclass(frozen=True, slots=True)
class ResultEvent:
    """What the operation returns (``final``: the last event of the stream), or what one round
    of a ReAct stream returned (its :class:`~lionagi.operations.react.ReActAnalysis`, not
    ``final``)."""

    value: Any
    final: bool = True


StreamEvent: TypeAlias = (
    TextDeltaEvent
    | ReasoningDeltaEvent
    | ToolCallDeltaEvent
    | ToolStarted
    | ToolFinished
    | MessageCommitted
    | PartialObjectEvent
    | ResultEvent
)
