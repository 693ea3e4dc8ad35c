"""Runtime state of one top-level turn (ADR-0018 D1) and the scope operation bodies receive.

A :class:`TurnExecutionContext` is created when a top-level turn acquires its Branch and is
dropped after finalization. It is never serialized. A :class:`TurnScope` is what operation
bodies get: the shared context plus whether this entry owns the lifecycle; its
:meth:`~TurnScope.call_model` is the one way an operation calls a model.
"""

from __future__ import annotations

import functools
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID

import anyio
from anyio import TaskInfo

from lionagi._compat import task_info
from lionagi._ids import uuid_of
from lionagi.protocols.messages import Usage

if TYPE_CHECKING:
    from types import ModuleType

    from pydantic import BaseModel

    from lionagi.operations.turn import StepGroup, StreamConsumer
    from lionagi.protocols.context_providers import ProviderReport
    from lionagi.protocols.messages import Instruction, Message
    from lionagi.service.imodel import iModel
    from lionagi.service.types import ModelResponse, StreamChunk
    from lionagi.session.branch import Branch
    from lionagi.session.control import LoopControl
    from lionagi.session.logs import LogManager
    from lionagi.session.observer import Observer
    from lionagi.session.signal import MessageAdded

__all__ = [
    "NestedWork",
    "TaskHandle",
    "TurnExecutionContext",
    "TurnPhase",
    "TurnScope",
]

logger = logging.getLogger("lionagi.turn")

TurnPhase = Literal["active", "finalizing", "closed"]


class NestedWork(Protocol):
    """Work registered with a turn, which finalization cancels and then awaits (ADR D2/D4)."""

    def cancel(self) -> None: ...

    async def join(self) -> None:
        """Wait until the work has finished, however it finished; never raises its failure."""


@dataclass(frozen=True, slots=True)
class _Outcome:
    """How a nested task ended: its return value, or the exception it raised."""

    value: Any = None
    error: Exception | None = None


class TaskHandle:
    """Nested work started with :meth:`TurnScope.start_soon`: an anyio task of the turn.

    ``await handle.wait()`` gives the task's result or re-raises its exception; a task that was
    cancelled (by ``cancel()`` or because its turn finished first) raises
    :class:`anyio.TaskCancelled`. A failure nobody awaits is logged, never raised into the turn.
    """

    __slots__ = ("_task", "name")

    def __init__(self, task: anyio.TaskHandle[_Outcome], name: str | None) -> None:
        self._task = task
        self.name = name

    def cancel(self) -> None:
        """Cancel the task (no effect once it finished)."""
        self._task.cancel()

    async def join(self) -> None:
        if not self.finished:
            await self._task.wait()

    async def wait(self) -> Any:
        """Wait for the task; return its result or re-raise its failure.

        Checkpoints. Cancelling the waiter does not cancel the task.
        """
        outcome = await self._task
        error = outcome.error
        if error is not None:
            try:
                raise error
            finally:
                del error
        return outcome.value

    @property
    def finished(self) -> bool:
        return self._task.status not in (
            anyio.TaskHandle.Status.PENDING,
            anyio.TaskHandle.Status.CANCELLING,
        )

    def __repr__(self) -> str:
        return f"<TaskHandle {self.name!r} {self._task.status.name.lower()}>"


_NO_USAGE = Usage()  # immutable: every turn starts from the same zero


@dataclass(eq=False, init=False)
class TurnExecutionContext:
    """Mutable runtime state of one top-level turn (ADR-0018 D1).

    ``signal_tasks`` of the ADR is kept as a queue of the turn's undelivered message signals
    (``pending_signals``): the turn's own tasks deliver them in order, one task at a time, at
    control points and at the end of each step (``lionagi.operations.turn``), so no task is
    started per message.

    Built from the three fields every turn gives; each other field reads its default (the
    class's) until the turn sets it, so a turn stores only what it changes.
    """

    #: the turn's id as its 128-bit number (what the logs record; :attr:`turn_id` is the UUID)
    turn_number: int
    #: the turn's model (the call's, else the Branch's for the operation's role)
    model: iModel
    #: the native task that started the turn (see :attr:`owner_task`)
    owner: object = field(repr=False)
    phase: TurnPhase = "active"
    provider_blocks: tuple[str, ...] = ()
    provider_report: ProviderReport | None = None
    control: LoopControl | None = None
    nested_tasks: set[NestedWork] = field(default_factory=set)
    #: usage reported by this turn's model calls, and how many calls there were
    usage: Usage = _NO_USAGE
    model_calls: int = 0
    #: requests those calls sent, retried attempts included
    model_attempts: int = 0
    operation: str | None = None
    # the task group of the owner's running step; None between the steps of a stream turn
    step_group: StepGroup | None = field(default=None, repr=False)
    # message signals raised in the turn and not delivered yet, in recording order; True while
    # a task of the turn delivers them, and the event another task waiting for that delivery
    # waits on
    pending_signals: deque[tuple[Observer, MessageAdded]] = field(default_factory=deque, repr=False)
    delivering: bool = field(default=False, repr=False)
    delivered: anyio.Event | None = field(default=None, repr=False)
    # for a stream turn: who may join the turn between items (see lionagi.operations.turn), and
    # the body's iterator, kept reachable from the Branch so a dropped stream object cannot
    # take the body down with it before the turn has closed it
    consumer: StreamConsumer | None = field(default=None, repr=False)
    stream_body: AsyncIterator[Any] | None = field(default=None, repr=False)
    #: where the turn's model calls are logged (the Branch's logs)
    logs: LogManager | None = field(default=None, repr=False)
    # what an installed tracer keeps for this turn (lionagi._instrument); None when untraced
    trace: Any = field(default=None, repr=False)
    _turn_uuid: UUID | None = field(default=None, repr=False)

    def __init__(self, turn_number: int, model: iModel, owner: object) -> None:
        self.turn_number = turn_number
        self.model = model
        self.owner = owner
        self.nested_tasks = set()
        self.pending_signals = deque()
        # read at every item of a stream turn: on the instance, where a read is quickest
        self.control = None
        self.delivering = False

    @property
    def turn_id(self) -> UUID:
        """The turn's id, a version-4 UUID. Made when first read: a turn nobody observes
        never needs the object (its logs record :attr:`turn_number`)."""
        uuid = self._turn_uuid
        if uuid is None:
            uuid = self._turn_uuid = uuid_of(self.turn_number)
        return uuid

    @property
    def owner_task(self) -> TaskInfo:
        """The anyio :class:`~anyio.TaskInfo` of the task that started the turn (built when
        read: the turn itself only needs the task's identity)."""
        return task_info(self.owner)

    def record_usage(self, usage: Usage | None, attempts: int = 1) -> None:
        """Add one model call's usage (and the requests it took) to the turn's totals."""
        self.model_calls += 1
        self.model_attempts += attempts
        if usage is not None:
            self.usage = self.usage + usage

    @property
    def signals_pending(self) -> bool:
        """Whether a message signal of this turn is queued or being delivered."""
        return self.delivering or bool(self.pending_signals)


@dataclass(frozen=True, slots=True)
class TurnScope:
    """What an operation body receives: the turn's context and whether it owns the lifecycle."""

    context: TurnExecutionContext
    owns_lifecycle: bool

    @property
    def turn_id(self) -> UUID:
        return self.context.turn_id

    def start_soon(
        self,
        fn: Callable[..., Awaitable[Any]],
        *args: Any,
        name: str | None = None,
    ) -> TaskHandle:
        """Start ``fn(*args)`` as nested work of this turn, in the calling step's task group.

        The task shares the turn (calls on the same Branch from it are nested, not queued). If it
        is still running when the step that started it ends, it is cancelled and awaited before
        the turn's terminal signal. A failure nobody awaited through the handle is logged.
        Raises :class:`~lionagi.operations.turn.TurnFinalizingError` once the turn is
        finalizing. Does not checkpoint.
        """
        from lionagi.operations.turn import start_nested

        return start_nested(self, fn, args, name)

    async def call_model(
        self,
        branch: Branch,
        model: iModel,
        *,
        ask: Instruction | None = None,
        pending: Sequence[Message] = (),
        messages: Sequence[Message] | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        response_format: type[BaseModel] | Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> ModelResponse:
        """One model call of this turn: poll control, check the usage limits, send, count usage.

        The request is ``messages`` when given (a request outside the conversation, such as
        parse's reformatting), else the conversation: the Branch's context providers are
        gathered for ``ask`` (once per turn), and the history plus ``pending`` (this request's
        messages not recorded yet) is sent. The retried attempts inside the call are signalled
        as :class:`~lionagi.session.signal.ModelRetry` to observers that want them.
        Checkpoints; cancelled, nothing of the call is recorded or counted.
        """
        request, on_retry = await _model_calls().prepare_call(self, branch, ask, pending, messages)
        response = await model.invoke(
            request,
            tools=tools,
            response_format=response_format,
            on_retry=on_retry,
            **(options or {}),
        )
        self.context.record_usage(response.usage, response.attempts)
        return response

    async def stream_model(
        self,
        branch: Branch,
        model: iModel,
        *,
        ask: Instruction,
        pending: Sequence[Message] = (),
        tools: Sequence[Mapping[str, Any]] = (),
        response_format: type[BaseModel] | Mapping[str, Any] | None = None,
        session_id: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[StreamChunk]:
        """:meth:`call_model` for a streamed conversation request: the model's chunk stream,
        opened after the control point and the usage check. The caller counts its usage with
        ``scope.context.record_usage`` once the stream is over, and closes it. Checkpoints."""
        calls = _model_calls()
        ready = calls.ready_call(self, branch, pending)
        request, on_retry = (
            await calls.prepare_call(self, branch, ask, pending, None) if ready is None else ready
        )
        # only what differs from iModel.request's defaults: the common request passes none
        asked: dict[str, Any] = {}
        if tools:
            asked["tools"] = tools
        if response_format is not None:
            asked["response_format"] = response_format
        if session_id is not None:
            asked["session_id"] = session_id
        if options:
            asked.update(options)
        # a stream turn's item waits for the model at the cancel scopes the model stream has:
        # they are registered with the turn's interrupt (lionagi._interrupt)
        consumer = self.context.consumer
        return model._chunks(
            request, on_retry, asked, None if consumer is None else consumer.interrupt
        )


_new_object = object.__new__
_set_context = TurnScope.__dict__["context"].__set__
_set_owns_lifecycle = TurnScope.__dict__["owns_lifecycle"].__set__


def _scope_of(context: TurnExecutionContext, owns_lifecycle: bool) -> TurnScope:
    """``TurnScope(context, owns_lifecycle)`` at about half the price: every turn makes one,
    and a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``."""
    scope: TurnScope = _new_object(TurnScope)
    _set_context(scope, context)
    _set_owns_lifecycle(scope, owns_lifecycle)
    return scope


@functools.cache
def _model_calls() -> ModuleType:
    """:mod:`lionagi.operations._model_call` (:func:`~lionagi.operations._model_call.prepare_call`
    and the rest of a model call's preparation), imported on first use (it imports this
    module). An import statement in the call would cost every model call about as much as
    building its request."""
    from lionagi.operations import _model_call

    return _model_call
