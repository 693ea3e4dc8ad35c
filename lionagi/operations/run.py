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
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import anyio

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
)
from lionagi.service._segmenter import Segmenter
from lionagi.service.imodel import iModel
from lionagi.service.types import FinalChunk, StreamChunk, TextDelta, ToolCallDelta

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
        segments = Segmenter(model)
        try:
            async for chunk in chunks:
                if events:
                    delta = _live_event(segments, chunk)
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


def _live_event(
    segments: Segmenter, chunk: StreamChunk
) -> TextDeltaEvent | ToolCallDeltaEvent | None:
    """The live event for ``chunk``, taken before ``segments`` is fed it: its text or tool-call
    piece, or the whole text of a final chunk from a provider that sent no text deltas (the
    text the segmenter will commit), or None."""
    if isinstance(chunk, TextDelta):
        return TextDeltaEvent(chunk.text) if chunk.text else None
    if isinstance(chunk, ToolCallDelta):
        return ToolCallDeltaEvent(chunk.index, chunk.id, chunk.name, chunk.arguments)
    if isinstance(chunk, FinalChunk):
        text = segments.unstreamed(chunk.response)
        return TextDeltaEvent(text) if text else None
    return None
