"""``run``: one streamed turn, handed out as the messages it commits.

The model's stream is cut into messages as it arrives: reply text becomes an
:class:`AssistantResponse` when a text segment ends, each tool call an :class:`ActionRequest`,
and a tool result reported by a provider that runs its own tools (the agentic CLI) an
:class:`ActionResponse`. For models with native tool calls the Branch's tools are run with
:func:`~lionagi.operations.act.act` and the model is streamed again with the results. Every
message is recorded in the history before the consumer sees it.

An agentic CLI's session id is kept per Branch and provider, so the next ``run`` on the Branch
resumes that session.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import anyio

from lionagi._textbuffer import TextBuffer
from lionagi.operations._model_call import check_usage_limits, retry_hook
from lionagi.operations._prepare import (
    apply_context_providers,
    build_instruction,
    model_for,
    request_messages,
)
from lionagi.operations.act import act_batch
from lionagi.operations.events import (
    MessageCommitted,
    StreamEvent,
    TextDeltaEvent,
    ToolCallDeltaEvent,
    ToolFinished,
    ToolStarted,
)
from lionagi.operations.turn import TurnStream, control_point, stream_in_turn
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    Reasoning,
    Usage,
)
from lionagi.service.errors import ProtocolError
from lionagi.service.imodel import iModel
from lionagi.service.types import (
    FinalChunk,
    ModelResponse,
    ReasoningEvent,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    ToolResultEvent,
    UsageChunk,
)

if TYPE_CHECKING:
    from lionagi.operations.params import RunParams
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch

__all__ = ["run", "stream"]

logger = logging.getLogger("lionagi.run")

_Item: TypeAlias = Message | StreamEvent


def run(branch: Branch, params: RunParams) -> TurnStream[Message]:
    """Stream one turn of ``branch`` as the messages it commits, each recorded before yielded.

    First the :class:`Instruction`, then assistant text segments, tool calls and tool results
    as the model produces them. Tools the model asks for are run (for models with native tool
    calls) and the model is called again, at most ``max_tool_rounds`` times; requests past
    that are answered with error results and not run. ``chat_model`` is used for this turn
    only. ``session_id`` resumes a CLI session; by default the Branch's last session with the
    same provider is resumed. Model options go to every model call.

    Returns a :class:`~lionagi.operations.turn.TurnStream`: read it in ``async with run(...)
    as stream:``. Nothing happens until iteration starts; leaving the block (or ``aclose()``)
    ends the turn and closes the provider stream at once. Reply text still
    streaming when the turn stops is not recorded: the history holds whole messages only.
    """
    body = _turn_body(branch, params, events=False)
    return stream_in_turn(
        branch,
        model=params.chat_model,
        invoke=lambda scope: cast(AsyncIterator[Message], body(scope)),
        operation="run",
    )


def stream(branch: Branch, params: RunParams) -> TurnStream[StreamEvent]:
    """Stream one turn of ``branch`` as live events: :func:`run`'s turn, with the model's text
    and tool-call deltas handed out as they arrive and the tools' start and finish marked.

    Each message :func:`run` would yield comes as a
    :class:`~lionagi.operations.events.MessageCommitted`, after the deltas it is made of; a
    committed reply's text is the concatenation of its
    :class:`~lionagi.operations.events.TextDeltaEvent` pieces. The stream pulls from the
    model one chunk per event, so a slow consumer slows the model stream (nothing is queued or
    dropped). Same lifetime contract as :func:`run`: read it in ``async with``; closing it
    mid-reply closes the provider stream at once and records no part of the unfinished reply.
    """
    body = _turn_body(branch, params, events=True)
    return stream_in_turn(
        branch,
        model=params.chat_model,
        invoke=lambda scope: cast(AsyncIterator[StreamEvent], body(scope)),
        operation="stream",
    )


def _turn_body(
    branch: Branch, params: RunParams, *, events: bool
) -> Callable[[TurnScope], AsyncIterator[_Item]]:
    message = build_instruction(
        params.instruction,
        guidance=params.guidance,
        context=params.context,
        images=params.images,
        sender=branch.user,
    )

    def invoke(scope: TurnScope) -> AsyncIterator[_Item]:
        return _stream_turn(
            branch,
            scope,
            message,
            params.chat_model,
            max_tool_rounds=params.max_tool_rounds,
            session_id=params.session_id,
            options=params.request_options,
            events=events,
        )

    return invoke


async def _stream_turn(
    branch: Branch,
    scope: TurnScope,
    instruction: Instruction,
    chat_model: iModel | None,
    *,
    max_tool_rounds: int,
    session_id: str | None,
    options: dict[str, Any],
    events: bool,
) -> AsyncGenerator[_Item, None]:
    """The body of the turn: record and yield each message, one model call per round; with
    ``events``, each message as a :class:`MessageCommitted` among the live events.

    The instruction is committed (and yielded) together with the first message of the reply:
    a turn whose model call fails or is cancelled before replying leaves no trace in history.
    """
    model = model_for(scope, branch, chat_model)
    uncommitted: tuple[Message, ...] = (instruction,)
    native = model.supports_native_tools
    tools = branch.tools.schemas() if native and len(branch.tools) else ()
    tool_rounds = 0
    while True:
        await control_point(scope)
        await apply_context_providers(branch, instruction, scope)
        resume = session_id or branch._resume_ids.get(model.provider_name)
        check_usage_limits(branch, scope)
        chunks = model.stream(
            request_messages(branch, scope, uncommitted),
            tools=tools,
            session_id=resume,
            on_retry=retry_hook(branch, scope),
            **options,
        )
        segments = _Segmenter(model)
        try:
            async for chunk in chunks:
                if events:
                    delta = segments.delta(chunk)
                    if delta is not None:
                        yield delta
                for message in segments.feed(chunk):
                    if uncommitted:  # the first reply: commit the instruction with it
                        branch.msgs.extend([*uncommitted, message])
                        uncommitted = ()
                        yield MessageCommitted(instruction) if events else instruction
                    else:
                        branch.msgs.add(message)
                    if not events:
                        yield message
                    else:
                        yield MessageCommitted(message)
                        if isinstance(message, ActionRequest) and not native:
                            yield ToolStarted(message)  # the provider runs its own tools
                        elif isinstance(message, ActionResponse):
                            yield ToolFinished(message)
                    await control_point(scope)
                await control_point(scope)
        finally:
            with anyio.CancelScope(shield=True):
                await _aclose(chunks)
            final = segments.final
            scope.context.record_usage(segments.usage, 1 if final is None else final.attempts)
        final = segments.final
        if uncommitted and final is not None:  # the model replied with nothing at all
            empty = AssistantResponse(content="", model=final.model, usage=final.usage)
            branch.msgs.extend([*uncommitted, empty])
            uncommitted = ()
            yield MessageCommitted(instruction) if events else instruction
            yield MessageCommitted(empty) if events else empty
        if final is not None and final.session_id:
            branch._resume_ids[model.provider_name] = final.session_id
        pending = segments.unanswered()
        if not native or not pending:
            return
        if tool_rounds >= max_tool_rounds:
            refused = [_not_run(request, max_tool_rounds) for request in pending]
            branch.msgs.extend(refused)  # every request gets its answer, as act would record
            for response in refused:
                yield MessageCommitted(response) if events else response
            return
        tool_rounds += 1
        if events:
            for request in pending:
                yield ToolStarted(request)
        # act polls control, records the results as one batch, and joins this turn
        for response in await act_batch(branch, pending):
            if events:
                yield MessageCommitted(response)
                yield ToolFinished(response)
            else:
                yield response


async def _aclose(chunks: AsyncIterator[StreamChunk]) -> None:
    """Close a model stream; an error from closing is logged, never raised (ADR-0018 D4)."""
    close = getattr(chunks, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception:
        logger.exception("closing a model stream failed")


def _not_run(request: ActionRequest, limit: int) -> ActionResponse:
    return ActionResponse(
        request_id=request.id,
        call_id=request.call_id,
        function=request.function,
        output=(
            f"not run: this turn already ran tools {limit} time(s), its max_tool_rounds; "
            "ask again in a new turn, or raise max_tool_rounds"
        ),
        is_error=True,
    )


@dataclass(slots=True)
class _PendingCall:
    """A tool call being assembled from deltas."""

    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)
    provider_fields: dict[str, Any] = field(default_factory=dict)


class _Segmenter:
    """Cuts one model call's chunks into the messages to commit, in stream order.

    Text gathers until its segment ends (a complete text block, a tool call or result, or the
    final chunk). Tool-call deltas gather until anything else arrives, since their argument
    text comes in fragments; at the final chunk the provider's parsed calls are preferred.
    Reasoning blocks ride on the next assistant message (an empty one before tool calls that
    follow no text); a refusal on the last one.
    """

    __slots__ = (
        "_answered",
        "_calls",
        "_model",
        "_reasoning",
        "_requests",
        "_text",
        "_texted",
        "final",
        "usage",
    )

    def __init__(self, model: iModel) -> None:
        self._model = model
        self._text = TextBuffer()  # one growing buffer: nothing kept per delta
        self._texted = False  # some text of this call was committed
        self._calls: dict[int, _PendingCall] = {}
        self._requests: dict[str, ActionRequest] = {}  # committed this call, by call id
        self._answered: set[str] = set()
        self._reasoning: list[Reasoning] = []
        self.final: ModelResponse | None = None
        self.usage: Usage | None = None

    def unanswered(self) -> list[ActionRequest]:
        """Tool calls of this model call that no provider-side result answered, in order."""
        return [r for call_id, r in self._requests.items() if call_id not in self._answered]

    def delta(self, chunk: StreamChunk) -> TextDeltaEvent | ToolCallDeltaEvent | None:
        """The live event for ``chunk``, taken before :meth:`feed`: its text or tool-call
        piece, or the whole text of a final chunk from a provider that sent no text deltas
        (the text :meth:`feed` will commit), or None."""
        if isinstance(chunk, TextDelta):
            return TextDeltaEvent(chunk.text) if chunk.text else None
        if isinstance(chunk, ToolCallDelta):
            return ToolCallDeltaEvent(chunk.index, chunk.id, chunk.name, chunk.arguments)
        if isinstance(chunk, FinalChunk):
            text = self._unstreamed(chunk.response)
            return TextDeltaEvent(text) if text else None
        return None

    def _unstreamed(self, response: ModelResponse) -> str:
        """Text of a final response that no text delta carried."""
        return "" if self._texted or self._text else response.text

    def feed(self, chunk: StreamChunk) -> list[Message]:
        if isinstance(chunk, TextDelta):
            out = self._flush_calls(None)
            self._text.write(chunk.text)
            if chunk.complete:
                out += self._flush_text(None)
            return out
        if isinstance(chunk, ToolCallDelta):
            out = self._flush_text(None)
            pending = self._calls.setdefault(chunk.index, _PendingCall())
            pending.id = chunk.id or pending.id
            pending.name = pending.name or chunk.name
            if chunk.arguments:
                pending.arguments.append(chunk.arguments)
            if chunk.provider_fields:
                pending.provider_fields.update(chunk.provider_fields)
            return out
        if isinstance(chunk, ReasoningEvent):
            self._reasoning.append(chunk.reasoning)
            return []
        if isinstance(chunk, ToolResultEvent):
            out = self._flush_text(None) + self._flush_calls(None)
            request = self._requests.get(chunk.call_id)
            if request is None:
                raise self._protocol(
                    f"a tool result for call {chunk.call_id!r} arrived before any tool call "
                    "with that id"
                )
            self._answered.add(chunk.call_id)
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
        if isinstance(chunk, UsageChunk):
            self.usage = chunk.usage
            return []
        if isinstance(chunk, FinalChunk):
            response = chunk.response
            self.final = response
            self.usage = response.usage
            if text := self._unstreamed(response):
                self._text.write(text)  # a provider that sent no text deltas
            if not self._reasoning and not self._texted and response.reasoning:
                self._reasoning.extend(response.reasoning)  # sent with no reasoning events
            return self._flush_text(response) + self._flush_calls(response)
        raise self._protocol(f"unexpected stream chunk {type(chunk).__name__}")

    def _flush_text(self, final: ModelResponse | None, *, empty: bool = False) -> list[Message]:
        """The gathered text as a message; ``empty``: one even without text, to carry
        reasoning. At the final chunk, a refusal makes a message too."""
        text = self._text.getvalue()
        self._text.clear()
        refusal = None if final is None else final.refusal
        if not text and not refusal and not (empty and self._reasoning):
            return []
        self._texted = self._texted or bool(text)
        extras: dict[str, Any] = {}
        if self._reasoning:
            extras["reasoning"] = tuple(self._reasoning)
            self._reasoning.clear()
        if final is None:
            return [AssistantResponse(content=text, model=self._model.model, **extras)]
        if refusal is not None:
            extras["refusal"] = refusal
        return [
            AssistantResponse(
                content=text, model=final.model or self._model.model, usage=final.usage, **extras
            )
        ]

    def _flush_calls(self, final: ModelResponse | None) -> list[Message]:
        parsed: dict[str, Any] = {}
        if final is not None:  # a call without an id is known by its place, as in deltas
            parsed = {call.id or f"call_{i}": call for i, call in enumerate(final.tool_calls)}
        out: list[Message] = self._flush_text(None, empty=True) if self._calls or parsed else []
        for index in sorted(self._calls):
            pending = self._calls[index]
            call_id = pending.id or f"call_{index}"
            known = parsed.get(call_id)
            fields = pending.provider_fields
            if known is not None:
                name, arguments = known.name, dict(known.arguments)
                fields = dict(known.provider_fields) or fields
            else:
                name, arguments = self._assemble(call_id, pending)
            out.append(self._request(call_id, name, arguments, fields))
        self._calls.clear()
        # calls of a provider that sent no tool-call deltas
        out.extend(
            self._request(call_id, call.name, dict(call.arguments), dict(call.provider_fields))
            for call_id, call in parsed.items()
            if call_id not in self._requests
        )
        return out

    def _request(
        self, call_id: str, name: str, arguments: dict[str, Any], fields: dict[str, Any]
    ) -> ActionRequest:
        if call_id in self._requests:
            raise self._protocol(f"tool call id {call_id!r} was used twice in one reply")
        extra = {"provider_fields": fields} if fields else {}
        request = ActionRequest(call_id=call_id, function=name, arguments=arguments, **extra)
        self._requests[call_id] = request
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
