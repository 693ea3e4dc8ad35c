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

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio

from lionagi.operations._model_call import close_stream
from lionagi.operations._prepare import instruction_for, text_instruction_for
from lionagi.operations.act import act_batch
from lionagi.operations.events import (
    MessageCommitted,
    ReasoningDeltaEvent,
    StreamEvent,
    TextDeltaEvent,
    ToolCallDeltaEvent,
    ToolFinished,
    ToolStarted,
    text_delta,
)
from lionagi.operations.turn import (
    TurnOptions,
    TurnStream,
    control_point,
    guard_wait,
    guarded_stream,
)
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
)
from lionagi.service._segmenter import Segmenter
from lionagi.service.types import (
    FinalChunk,
    ModelResponse,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
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
    return _start(branch, params, "run")


def stream(branch: Branch, params: RunParams) -> TurnStream[StreamEvent]:
    """Stream one turn of ``branch`` as live events: :func:`run`'s turn, with the model's text,
    reasoning and tool-call deltas handed out as they arrive and the tools' start and finish
    marked.

    Each message :func:`run` would yield comes as a
    :class:`~lionagi.operations.events.MessageCommitted`, after the deltas it is made of; a
    committed reply's text is the concatenation of its
    :class:`~lionagi.operations.events.TextDeltaEvent` pieces. The stream pulls from the
    model one chunk per event, so a slow consumer slows the model stream (nothing is queued or
    dropped). Same lifetime contract as :func:`run`: read it in ``async with``; closing it
    mid-reply closes the provider stream at once and records no part of the unfinished reply.
    """
    return _start(branch, params, "stream")


def stream_text(branch: Branch, text: str, defaults: RunParams) -> TurnStream[Any] | None:
    """:func:`stream` of the instruction ``text`` alone (``defaults``: every other parameter's
    default), the commonest call: its instruction built at once, no parameters bound. ``None``
    when the general way must build the instruction (see
    :func:`~lionagi.operations._prepare.text_instruction_for`). Typed as :func:`_start`."""
    instruction = text_instruction_for(branch, text)
    if instruction is None:
        return None
    body = _RunTurn(branch, instruction, defaults, True)
    return guarded_stream(branch, None, body.items, _STREAM)


def _start(branch: Branch, params: RunParams, operation: str) -> TurnStream[Any]:
    """The stream turn of :func:`run` (messages) or :func:`stream` (live events). Typed
    ``Any`` so that each returns it as its own item type: a ``cast(TurnStream[...], ...)``
    would build the subscripted generic at every call (a few microseconds)."""
    body = _RunTurn(branch, instruction_for(branch, params), params, operation == "stream")
    return guarded_stream(branch, params.chat_model, body.items, _OPTIONS[operation])


# the turn options of each operation (guarded_stream's: one mapping for every call)
_OPTIONS: dict[str, TurnOptions] = {
    name: TurnOptions(operation=name, nests=False) for name in ("run", "stream")
}
_STREAM = _OPTIONS["stream"]


@dataclass(slots=True, eq=False)
class _RunTurn:
    """One run turn: each round streams one model call into committed messages, then runs the
    tools it asked for (models with native tool calls). ``events`` hands out the live events
    of :func:`stream` instead of the bare messages.

    The instruction is committed (and handed out) together with the first message of the
    reply: a turn whose model call fails or is cancelled before replying leaves no trace in
    history.
    """

    branch: Branch
    instruction: Instruction
    params: RunParams  # what the turn reads of them: all but the instruction, built already
    events: bool
    # set when the turn's body starts (items): the turn, the model's, the history's
    scope: TurnScope = field(init=False)
    native: bool = False
    tools: tuple[dict[str, Any], ...] = ()
    uncommitted: tuple[Message, ...] = field(init=False)
    rounds_left: int = field(init=False)  # tool rounds this turn may still run

    async def items(self, scope: TurnScope) -> AsyncGenerator[_Item, None]:
        """The turn's items, one model call a round; holds no cancel scope across a yield."""
        self.scope, branch, params = scope, self.branch, self.params
        self.uncommitted = (self.instruction,)
        self.rounds_left = params.max_tool_rounds
        context, events = scope.context, self.events
        model = params.chat_model  # model_for's choice, without its call
        if model is None:
            model = context.model
        self.native = native = model.supports_native_tools
        self.tools = branch.tools.schemas() if native and branch.has_tools else ()
        # one model call a round: its waits (the context providers, the opening, each chunk)
        # are guarded where they are (see lionagi.operations.turn.stream_in_turn)
        while self.rounds_left >= 0:
            session_id = params.session_id  # else the Branch's last session with the provider
            chunks = await scope.stream_model(
                branch,
                model,
                ask=self.instruction,
                pending=self.uncommitted,
                tools=self.tools,
                session_id=(
                    branch.resume_id(model.provider_name) if session_id is None else session_id
                ),
                options=params.request_options if params.options else None,
            )
            segments = Segmenter(model)
            try:
                async for chunk in chunks:
                    if type(chunk) is TextDelta and segments.take_text(chunk):
                        # a piece of text that ends no message: the path of nearly every chunk
                        if events and chunk.text:
                            yield text_delta(chunk.text)
                        if (
                            context.control is not None
                            or context.pending_signals
                            or context.delivering
                        ):
                            await control_point(scope)
                        continue
                    if events and (delta := _live_event(segments, chunk)) is not None:
                        yield delta
                    for message in segments.feed(chunk):
                        for item in self.commit(message):
                            yield item
                        await control_point(scope)
                    await control_point(scope)
            finally:
                await self.close_call(chunks, segments)
            async with aclosing(self.after_call(segments, model.provider_name)) as after:
                async for item in after:
                    yield item

    async def close_call(self, chunks: AsyncIterator[StreamChunk], segments: Segmenter) -> None:
        """Close the model stream (shielded: also when the turn is cancelled) and count the
        call's usage."""
        with anyio.CancelScope(shield=True):
            await close_stream(chunks)
        final = segments.final
        self.scope.context.record_usage(segments.usage, 1 if final is None else final.attempts)

    async def after_call(self, segments: Segmenter, provider: str) -> AsyncGenerator[_Item, None]:
        """What follows a model call: its end (:meth:`end_call`), then the tools it asked for,
        run as the next round, or refused past ``max_tool_rounds``. Ends the turn when no tool
        round follows (``rounds_left`` below zero)."""
        for item in self.end_call(segments.final, provider):
            yield item
        pending = segments.unanswered()
        if not self.native or not pending:
            self.rounds_left = -1
            return
        if self.rounds_left == 0:
            self.rounds_left = -1
            for item in self.refuse(pending):
                yield item
            return
        self.rounds_left -= 1
        if self.events:
            for request in pending:
                yield ToolStarted(request)
        # act polls control, records the results as one batch, and joins this turn
        with guard_wait(self.scope):
            responses = await act_batch(self.branch, pending)
        for response in responses:
            for item in self.handed_out(response):
                yield item

    def commit(self, message: Message) -> Iterator[_Item]:
        """Record ``message`` (after the instruction, for the first reply) and hand it out."""
        if self.uncommitted:
            self.branch.msgs.extend([*self.uncommitted, message])
            self.uncommitted = ()
            yield MessageCommitted(self.instruction) if self.events else self.instruction
        else:
            self.branch.msgs.add(message)
        yield from self.handed_out(message)

    def handed_out(self, message: Message) -> Iterator[_Item]:
        """What the consumer gets for a recorded message: the message, or its events."""
        if not self.events:
            yield message
            return
        yield MessageCommitted(message)
        if isinstance(message, ActionRequest) and not self.native:
            yield ToolStarted(message)  # the provider runs its own tools
        elif isinstance(message, ActionResponse):
            yield ToolFinished(message)

    def end_call(self, final: ModelResponse | None, provider: str) -> Iterator[_Item]:
        """After a model call: an empty reply for a model that said nothing at all, and the
        CLI session to resume next time."""
        if final is None:
            return
        if self.uncommitted:
            yield from self.commit(
                AssistantResponse(content="", model=final.model, usage=final.usage)
            )
        if final.session_id:
            self.branch.resume_ids[provider] = final.session_id

    def refuse(self, pending: list[ActionRequest]) -> Iterator[_Item]:
        """Answer the requests past ``max_tool_rounds`` with error results, as act would."""
        refused = [_not_run(request, self.params.max_tool_rounds) for request in pending]
        self.branch.msgs.extend(refused)
        for response in refused:
            yield from self.handed_out(response)


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


def _live_event(
    segments: Segmenter, chunk: StreamChunk
) -> TextDeltaEvent | ReasoningDeltaEvent | ToolCallDeltaEvent | None:
    """The live event for ``chunk``, taken before ``segments`` is fed it: its text, reasoning or
    tool-call piece, or the whole text of a final chunk from a provider that sent no text
    deltas (the text the segmenter will commit), or None."""
    if isinstance(chunk, TextDelta):
        return TextDeltaEvent(chunk.text) if chunk.text else None
    if isinstance(chunk, ReasoningDelta):
        return ReasoningDeltaEvent(chunk.text) if chunk.text else None
    if isinstance(chunk, ToolCallDelta):
        return ToolCallDeltaEvent(chunk.index, chunk.id, chunk.name, chunk.arguments)
    if isinstance(chunk, FinalChunk):
        text = segments.unstreamed(chunk.response)
        return TextDeltaEvent(text) if text else None
    return None
