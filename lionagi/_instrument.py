"""The instrumentation interface: the few points where the turn driver, ``iModel`` and ``act``
report what runs, to a Branch's logs and to an installed :class:`Tracer`.

The hook points are

- the turn driver: :func:`turn_step` / :func:`turn_step_done` around every step of a turn (a
  coroutine turn has one, a stream turn one per item), and the ``close`` of what the tracer
  kept on ``context.trace`` when the turn releases its Branch;
- ``Session.flow`` / ``flow_stream`` through :func:`flow` around the whole run (its nodes' turns
  nest under it);
- ``iModel.invoke`` through :func:`invoke`, ``iModel.stream`` through :func:`stream` (tracing)
  and :func:`stream_log` (its log record);
- each tool call of ``act`` through :func:`tool_call`.

With no tracer installed (the default) a hook costs a read of the module global ``tracer``;
model calls made inside a turn also add one record to the Branch's logs. ``lionagi.otel``
installs the OpenTelemetry tracer. Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from functools import partial
from time import time
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from lionagi.protocols.messages import RecordedCopy
from lionagi.session.logs import request_settings

if TYPE_CHECKING:
    from lionagi.operations.types import TurnExecutionContext
    from lionagi.protocols.messages import ActionRequest, ActionResponse
    from lionagi.service.imodel import iModel
    from lionagi.service.retry import RetryHook
    from lionagi.service.types import ModelRequest, ModelResponse, StreamChunk
    from lionagi.session.branch import Branch
    from lionagi.session.flow import _Flow

__all__ = [
    "FlowTrace",
    "StepTrace",
    "Tracer",
    "TurnTrace",
    "active_turn",
    "flow",
    "install",
    "invoke",
    "stream",
    "stream_log",
    "tool_call",
    "tracer",
    "turn_step",
    "turn_step_done",
]

OutcomeT = TypeVar("OutcomeT")


class StepTrace(Protocol):
    """What a tracer returns for one step of a turn; ``done`` is called at the step's end, in
    the task that ran it, with the step's exception and whether the step ended the turn."""

    def done(self, error: BaseException | None, final: bool) -> None: ...


class TurnTrace(Protocol):
    """What a tracer keeps on ``TurnExecutionContext.trace``; ``close`` is called once, when
    the turn releases its Branch (also for a stream abandoned without a final step)."""

    def close(self) -> None: ...


class FlowTrace(Protocol):
    """What a tracer returns for one run of a flow; ``done`` is called once, in the task that
    ran the flow, with how it ended, its exception (None unless it raised) and the number of
    nodes per outcome (``completed``, ``failed``, ``skipped``, ``cancelled``)."""

    def done(self, status: str, error: BaseException | None, counts: Mapping[str, int]) -> None: ...


class Tracer(Protocol):
    """What an installed tracer implements (see ``lionagi.otel`` for the OpenTelemetry one).

    ``turn_step`` is called at the start of every step of a turn, in the task running it (so a
    tracer may make the turn's span current for the step); it may set ``context.trace``.
    """

    def turn_step(self, branch: Branch, context: TurnExecutionContext) -> StepTrace: ...

    def flow(self, flow: _Flow) -> FlowTrace:
        """Start of a flow run, in the task running it (the nodes' tasks are started from it,
        so a tracer may make the flow's span current for the whole run)."""
        ...

    async def model_call(
        self,
        model: iModel,
        request: ModelRequest,
        send: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse: ...

    def model_stream(
        self, model: iModel, request: ModelRequest, chunks: AsyncIterator[StreamChunk]
    ) -> AsyncIterator[StreamChunk]: ...

    async def tool_call(
        self,
        request: ActionRequest,
        call: Callable[[], Awaitable[OutcomeT]],
        response_of: Callable[[OutcomeT], ActionResponse],
    ) -> OutcomeT: ...


#: The installed tracer; None (the default) means tracing is off.
tracer: Tracer | None = None


def install(new: Tracer | None) -> Tracer | None:
    """Install ``new`` (None: turn tracing off); returns the tracer it replaces."""
    global tracer
    old, tracer = tracer, new
    return old


# -- turn driver --------------------------------------------------------------------------------
def turn_step(branch: Branch, context: TurnExecutionContext) -> StepTrace:
    """Start of a turn step; call only while a tracer is installed (check ``tracer`` first)."""
    assert tracer is not None
    return tracer.turn_step(branch, context)


def turn_step_done(step: StepTrace, error: BaseException | None, final: bool) -> None:
    """End of a turn step that :func:`turn_step` saw."""
    step.done(error, final)


# -- flows --------------------------------------------------------------------------------------
def flow(run: _Flow) -> FlowTrace:
    """Start of a flow run; call only while a tracer is installed (check ``tracer`` first)."""
    assert tracer is not None
    return tracer.flow(run)


# -- model calls --------------------------------------------------------------------------------
#: The turn the calling task is part of: the turn driver's binding (None outside any turn). It
#: lives here so the model-call hooks read it without importing the driver.
active_turn: ContextVar[Any] = ContextVar("lionagi_active_turn", default=None)


async def invoke(model: iModel, request: ModelRequest, on_retry: RetryHook | None) -> ModelResponse:
    """``model``'s call of ``request`` under its retry policy (``on_retry`` called before each
    retry), traced when a tracer is installed and logged when made in a turn.

    The untraced path is the cost of every model call: no closure, one ContextVar read, and
    in a turn one entry appended to the Branch's logs. The attempt (no retry policy) or the
    retry loop is awaited from here, not through ``iModel._retried``: the hook adds no
    coroutine frame to the call.
    """
    binding = active_turn.get()
    if binding is None or (logs := (context := binding.scope.context).logs) is None:
        if tracer is None:
            return await model._retried(request, on_retry)
        return await tracer.model_call(model, request, partial(model._retried, on_retry=on_retry))
    started = time()
    try:
        if tracer is not None:
            send = partial(model._retried, on_retry=on_retry)
            response = await tracer.model_call(model, request, send)
        elif (retry := model.retry) is None:
            response = await model._attempt(request)
        else:  # iModel._retried's loop, awaited from this frame (no frame of its own)
            attempt = lambda: model._attempt(request)  # noqa: E731
            response, attempts = await model._retrying(retry, attempt, on_retry)
            if attempts > 1:
                response = response.model_copy(update={"attempts": attempts})
    except BaseException as exc:
        turn = context.turn_number
        logs.record_api_call(
            model.provider.name, request, None, exc, binding.branch_id, turn, started
        )
        raise
    if logs._capacity is not None:  # a bounded log: the record may replace the oldest one
        turn = context.turn_number
        name = model.provider.name
        logs.record_api_call(name, request, response, None, binding.branch_id, turn, started)
        return response
    # the common record, written here (a call less per model call) in the layout of
    # LogManager.record_api_call, which writes every other case
    messages = request.messages
    if messages.__class__ is RecordedCopy:  # a Branch's request: its size and last message
        pending = messages._pending  # read from its parts (its len and [-1] are Python calls)
        count = messages.recorded + len(pending)
        last = pending[-1] if pending else messages[-1] if count else None
    else:
        count = len(messages)
        last = messages[-1] if messages else None
    logs._slots.extend(
        (
            started,
            time(),
            binding.branch_id,
            context.turn_number,
            model.provider.name,
            request.model,
            count,
            last,
            request.tools,
            None  # the common request's settings: none (read from the request, no locals)
            if request.response_format is None
            and not request.options
            and request.session_id is None
            else request_settings(request),
            response,
        )
    )
    return response


def stream(
    model: iModel, request: ModelRequest, chunks: AsyncIterator[StreamChunk]
) -> AsyncIterator[StreamChunk]:
    """``chunks`` as they are when no tracer is installed, else an iterator over them that
    traces the call. Closing it closes ``chunks``. The call's log record is :func:`stream_log`'s."""
    active = tracer
    return chunks if active is None else active.model_stream(model, request, chunks)


class StreamLog(tuple[Any, ...]):
    """The log record of one streamed model call made in a turn, written by ``iModel`` when
    the stream ends (no iterator of its own around the chunks: a stream is logged at no cost
    per chunk): the model, the request, the turn's logs, the Branch id, the turn's number and
    ``started``, when it was made (the call's start). A tuple: made in one call, without a
    Python frame, at every stream's opening."""

    __slots__ = ()

    def done(self, response: ModelResponse | None, error: BaseException | None) -> None:
        """The stream ended: with ``response`` (its final chunk's), or failed with ``error``."""
        model, request, logs, branch_id, turn, started = self
        logs.record_api_call(
            model.provider.name, request, response, error, branch_id, turn, started
        )


_new_record = tuple.__new__


def stream_log(model: iModel, request: ModelRequest) -> StreamLog | None:
    """The log record of a streamed call of ``request`` starting now, when made in a turn."""
    binding = active_turn.get()
    if binding is None:
        return None
    context = binding.scope.context
    logs = context.logs
    if logs is None:
        return None
    return _new_record(  # a StreamLog
        StreamLog, (model, request, logs, binding.branch_id, context.turn_number, time())
    )


# -- tool calls ---------------------------------------------------------------------------------
async def tool_call(
    request: ActionRequest,
    call: Callable[[], Awaitable[OutcomeT]],
    response_of: Callable[[OutcomeT], ActionResponse],
) -> OutcomeT:
    """``call()``, traced as a tool call when a tracer is installed."""
    active = tracer
    if active is None:
        return await call()
    return await active.tool_call(request, call, response_of)
