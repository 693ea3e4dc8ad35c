"""Cutting one model call's stream into the messages a turn commits.

A provider streams deltas (text, tool-call fragments, reasoning, provider-run tool results) and
one final chunk; :class:`Segmenter` turns them into whole :class:`AssistantResponse`,
:class:`ActionRequest` and :class:`ActionResponse` messages as each one ends, so the caller can
record a message before anyone sees it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias

from lionagi._textbuffer import TextBuffer
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Message,
    Reasoning,
    ToolCall,
    Usage,
)
from lionagi.service.errors import ProtocolError
from lionagi.service.types import (
    FinalChunk,
    ModelResponse,
    ReasoningDelta,
    ReasoningEvent,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    ToolResultEvent,
    UsageChunk,
)

if TYPE_CHECKING:
    from lionagi.service.imodel import iModel

__all__ = ["Segmenter"]


# what a call that streams text alone never fills: shared, read-only (a write fails loudly)
# empties until its first tool call, tool result or reasoning block
_NO_CALLS: Mapping[int, _PendingCall] = MappingProxyType({})
_NO_REQUESTS: Mapping[str, ActionRequest] = MappingProxyType({})


@dataclass(slots=True)
class _PendingCall:
    """A tool call being assembled from deltas."""

    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)
    provider_fields: dict[str, Any] = field(default_factory=dict)


class Segmenter:
    """Cuts one model call's chunks into the messages to commit, in stream order.

    Text gathers until its segment ends (a complete text block, a tool call or result, or the
    final chunk). Tool-call deltas gather until anything else arrives, since their argument
    text comes in fragments; at the final chunk the provider's parsed calls are preferred.
    Reasoning blocks ride on the next assistant message (an empty one before tool calls that
    follow no text); a refusal on the last one.

    A provider whose later requests send a reply back as its raw payload
    (``replays_raw_replies``, the Responses API's output items) has its reply committed whole
    at the final chunk, as an invoked call records it: the payload only exists then, and the
    pieces committed before it would be sent twice.
    """

    __slots__ = (
        "_answered",
        "_calls",
        "_model",
        "_reasoned",
        "_reasoning",
        "_requests",
        "_text",
        "_texted",
        "_whole",
        "final",
        "usage",
    )

    def __init__(self, model: iModel) -> None:
        self._model = model
        self._text = TextBuffer()  # one growing buffer: nothing kept per delta
        self._texted = False  # some text of this call was committed
        # until first written, shared read-only empties: a call that streams text alone (the
        # common reply) builds none of these
        self._calls: Mapping[int, _PendingCall] = _NO_CALLS
        self._requests: Mapping[str, ActionRequest] = _NO_REQUESTS  # committed, by call id
        self._answered: Set[str] = frozenset()
        self._reasoning: Sequence[Reasoning] = ()
        self._reasoned = False  # reasoning came as events, not only in the final response
        self._whole = model.provider.replays_raw_replies
        self.final: ModelResponse | None = None
        self.usage: Usage | None = None

    def unanswered(self) -> list[ActionRequest]:
        """Tool calls of this model call that no provider-side result answered, in order."""
        return [r for call_id, r in self._requests.items() if call_id not in self._answered]

    def unstreamed(self, response: ModelResponse) -> str:
        """Text of a final response that no text delta carried: what :meth:`feed` will commit
        from it, so a live view can show it as one piece."""
        return "" if self._texted or self._text else response.text

    def take_text(self, chunk: TextDelta) -> bool:
        """Take a text delta that ends no message (no tool call is being gathered, it does not
        complete its block, the provider's reply is committed in pieces): the common chunk,
        without :meth:`feed`'s dispatch. False when the delta must be fed instead."""
        if self._calls or self._whole or chunk.complete:
            return False
        self._text.write(chunk.text)
        return True

    def feed(self, chunk: StreamChunk) -> list[Message]:
        """The messages ``chunk`` completes, in stream order (often none)."""
        table = _WHOLE if self._whole else _SEGMENTED
        handler = table.get(type(chunk))
        if handler is None:
            raise self._protocol(f"unexpected stream chunk {type(chunk).__name__}")
        return handler(self, chunk)

    def _text_delta(self, chunk: TextDelta) -> list[Message]:
        out = self._flush_calls(None)
        self._text.write(chunk.text)
        if chunk.complete:
            out += self._flush_text(None)
        return out

    def _call_delta(self, chunk: ToolCallDelta) -> list[Message]:
        out = self._flush_text(None)
        calls = self._calls
        if isinstance(calls, dict):
            pending = calls.setdefault(chunk.index, _PendingCall())
        else:
            pending = _PendingCall()
            self._calls = {chunk.index: pending}
        pending.id = chunk.id or pending.id
        pending.name = pending.name or chunk.name
        if chunk.arguments:
            pending.arguments.append(chunk.arguments)
        if chunk.provider_fields:
            pending.provider_fields.update(chunk.provider_fields)
        return out

    def _reasoning_delta(self, chunk: ReasoningDelta) -> list[Message]:
        return []  # for live views: the block comes whole (ReasoningEvent or final chunk)

    def _reasoning_event(self, chunk: ReasoningEvent) -> list[Message]:
        self._reasoned = True
        reasoning = self._reasoning
        if isinstance(reasoning, list):
            reasoning.append(chunk.reasoning)
        else:
            self._reasoning = [chunk.reasoning]
        return []

    def _tool_result(self, chunk: ToolResultEvent) -> list[Message]:
        out = self._flush_text(None) + self._flush_calls(None)
        request = self._requests.get(chunk.call_id)
        if request is None:
            raise self._protocol(
                f"a tool result for call {chunk.call_id!r} arrived before any tool call "
                "with that id"
            )
        answered = self._answered
        if isinstance(answered, set):
            answered.add(chunk.call_id)
        else:
            self._answered = {chunk.call_id}
        out.append(
            ActionResponse(
                request_id=request.id,
                call_id=request.call_id,
                function=request.function,
                output=chunk.output,
                is_error=chunk.is_error,
            )
        )
        return out

    def _usage(self, chunk: UsageChunk) -> list[Message]:
        self.usage = chunk.usage
        return []

    def _final(self, chunk: FinalChunk) -> list[Message]:
        response = chunk.response
        self.final = response
        self.usage = response.usage
        if text := self.unstreamed(response):
            self._text.write(text)  # a provider that sent no text deltas
        if not self._reasoned and not self._texted and response.reasoning:
            # sent with no reasoning events
            self._reasoning = [*self._reasoning, *response.reasoning]
        return self._flush_text(response) + self._flush_calls(response)

    # -- whole replies: the final chunk is the reply, deltas are for live views only --------
    def _seen_text(self, chunk: TextDelta) -> list[Message]:
        self._texted = self._texted or bool(chunk.text)
        return []

    def _seen_call(self, chunk: ToolCallDelta) -> list[Message]:
        return []

    def _whole_reply(self, chunk: FinalChunk) -> list[Message]:
        """The reply as an invoked call records it: one assistant message carrying the raw
        response, then its tool calls."""
        response = chunk.response
        self.final = response
        self.usage = response.usage
        extras: dict[str, Any] = {}
        if reasoning := response.reasoning or tuple(self._reasoning):
            extras["reasoning"] = reasoning
        if response.refusal is not None:
            extras["refusal"] = response.refusal
        reply = AssistantResponse(
            content=response.text,
            model=response.model or self._model.model,
            usage=response.usage,
            raw=response.raw,
            **extras,
        )
        out: list[Message] = [reply]
        for i, call in enumerate(response.tool_calls):
            fields = dict(call.provider_fields)
            out.append(
                self._request(call.id or f"call_{i}", call.name, dict(call.arguments), fields)
            )
        return out

    def _flush_text(self, final: ModelResponse | None, *, empty: bool = False) -> list[Message]:
        """The gathered text as a message; ``empty``: one even without text, to carry
        reasoning. At the final chunk, a refusal makes a message too."""
        text = self._text.getvalue()
        self._text.clear()
        refusal = None if final is None else final.refusal
        if not text and not refusal and not (empty and self._reasoning):
            return []
        self._texted = self._texted or bool(text)
        extras = self._take_reasoning()
        if final is None:
            return [AssistantResponse(content=text, model=self._model.model, **extras)]
        if refusal is not None:
            extras["refusal"] = refusal
        model = final.model or self._model.model
        return [AssistantResponse(content=text, model=model, usage=final.usage, **extras)]

    def _take_reasoning(self) -> dict[str, Any]:
        """The gathered reasoning blocks as message fields (none when there are none)."""
        if not self._reasoning:
            return {}
        reasoning = tuple(self._reasoning)
        self._reasoning = ()
        return {"reasoning": reasoning}

    def _flush_calls(self, final: ModelResponse | None) -> list[Message]:
        # a call without an id is known by its place, as in deltas
        parsed = {} if final is None else _by_id(final.tool_calls)
        out: list[Message] = self._flush_text(None, empty=True) if self._calls or parsed else []
        out.extend(self._gathered(index, parsed) for index in sorted(self._calls))
        self._calls = _NO_CALLS
        # calls of a provider that sent no tool-call deltas
        out.extend(
            self._request(call_id, call.name, dict(call.arguments), dict(call.provider_fields))
            for call_id, call in parsed.items()
            if call_id not in self._requests
        )
        return out

    def _gathered(self, index: int, parsed: dict[str, ToolCall]) -> ActionRequest:
        """The request of the call gathered at ``index``; the provider's parsed call wins."""
        pending = self._calls[index]
        call_id = pending.id or f"call_{index}"
        known = parsed.get(call_id)
        if known is None:
            name, arguments = self._assemble(call_id, pending)
            return self._request(call_id, name, arguments, pending.provider_fields)
        fields = dict(known.provider_fields) or pending.provider_fields
        return self._request(call_id, known.name, dict(known.arguments), fields)

    def _request(
        self, call_id: str, name: str, arguments: dict[str, Any], fields: dict[str, Any]
    ) -> ActionRequest:
        if call_id in self._requests:
            raise self._protocol(f"tool call id {call_id!r} was used twice in one reply")
        extra: dict[str, Any] = {"provider_fields": fields} if fields else {}
        request = ActionRequest(call_id=call_id, function=name, arguments=arguments, **extra)
        requests = self._requests
        if isinstance(requests, dict):
            requests[call_id] = request
        else:
            self._requests = {call_id: request}
        return request

    def _assemble(self, call_id: str, pending: _PendingCall) -> tuple[str, dict[str, Any]]:
        if not pending.name:
            raise self._protocol(f"tool call {call_id!r} has no function name")
        text = "".join(pending.arguments)
        try:
            arguments = json.loads(text) if text.strip() else {}
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            raise self._protocol(
                f"tool call {pending.name!r} has arguments that are not a JSON object: "
                f"{text[:200]!r}"
            )
        return pending.name, arguments

    def _protocol(self, message: str) -> ProtocolError:
        return ProtocolError(message, provider=self._model.provider_name, model=self._model.model)


def _by_id(calls: tuple[ToolCall, ...]) -> dict[str, ToolCall]:
    return {call.id or f"call_{i}": call for i, call in enumerate(calls)}


_Handler: TypeAlias = Callable[[Segmenter, Any], list[Message]]

#: how each chunk type is fed, by exact type
_SEGMENTED: dict[type, _Handler] = {
    TextDelta: Segmenter._text_delta,
    ToolCallDelta: Segmenter._call_delta,
    ReasoningDelta: Segmenter._reasoning_delta,
    ReasoningEvent: Segmenter._reasoning_event,
    ToolResultEvent: Segmenter._tool_result,
    UsageChunk: Segmenter._usage,
    FinalChunk: Segmenter._final,
}
_WHOLE: dict[type, _Handler] = {
    **_SEGMENTED,
    TextDelta: Segmenter._seen_text,
    ToolCallDelta: Segmenter._seen_call,
    FinalChunk: Segmenter._whole_reply,
}
