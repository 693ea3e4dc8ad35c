"""The one owner of a turn's lifecycle (ADR-0018 D2-D5), on anyio.

Every model-invoking operation of a :class:`~lionagi.session.branch.Branch` enters here, through
:func:`run_in_turn` (a coroutine) or :func:`stream_in_turn` (a :class:`TurnStream`). A top-level
entry

1. waits for the Branch's turn lock (FIFO; cancelling the wait leaves no trace),
2. creates the :class:`TurnExecutionContext`, points the Branch at it and binds it task-locally,
3. runs the body inside an anyio task group that owns the turn's nested work, emitting
   ``RunStart`` first; message signals raised in the turn are queued on its context and
   delivered by the turn's own tasks at control points and step ends,
4. finalizes inside a shielded cancel scope: phase "finalizing", cancel and await unfinished
   nested work, drain message signals, emit exactly one ``RunEnd``/``RunFailed``, publish the
   context report, phase "closed", clear the pointer, reset the binding, release the lock.

A call made while the same Branch's turn is live in the calling task's context is *nested*: it
shares the context and owns nothing. So is a call made between two items of a stream turn by the
task that iterates the stream (its *consumer*): it is registered as nested work, the next item
waits for it, and closing the stream cancels and awaits it.

A stream turn runs its body one step per item. Each step has its own task group (or, when its
body starts no nested work, only a cancel scope), so no task group or cancel scope is open
across the hand-over of an item (PEP 789): :class:`TurnStream` is a plain
object, not an async generator, and it hands an item out only after the step's nested work was
joined and its message signals were delivered. A stream dropped while its turn is open is
*abandoned*: nothing can join it any more, and it is finalized (``RunEnd``, lock released) on the
event loop it ran on.
"""

from __future__ import annotations

import enum
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar, Token
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Literal, TypedDict, TypeVar, Unpack, cast
from uuid import UUID

import anyio
from anyio.abc import TaskGroup
from anyio.lowlevel import cancel_shielded_checkpoint

from lionagi import _instrument
from lionagi._compat import (
    CancelHandle,
    current_task,
    loop_and_task_lookup,
    new_cancel_scope,
    running,
    spawn_detached,
    spawn_threadsafe,
)
from lionagi._declared import unexpected_keywords
from lionagi._ids import new_id_int
from lionagi._interrupt import Interrupt, guard
from lionagi.errors import ConfigurationError, TurnFinalizingError
from lionagi.operations.types import (
    TaskHandle,
    TurnExecutionContext,
    TurnScope,
    _Outcome,
    _scope_of,
)
from lionagi.session.control import StopStream, check_control
from lionagi.session.signal import (
    MessageAdded,
    RunEnd,
    RunFailed,
    RunStart,
    _trusted,
    _trusted_values,
    current_op_id,
)

if TYPE_CHECKING:
    from lionagi.operations.types import NestedWork
    from lionagi.protocols.messages import Message
    from lionagi.service.imodel import iModel
    from lionagi.session.branch import Branch
    from lionagi.session.observer import Observer

__all__ = [
    "DriverState",
    "StepOutcome",
    "TurnFinalizingError",
    "TurnOptions",
    "TurnStream",
    "control_point",
    "current_scope",
    "run_in_turn",
    "schedule_message_signal",
    "stream_in_turn",
]

logger = logging.getLogger("lionagi.turn")

T = TypeVar("T")
ModelRole = Literal["chat", "parse"]


class TurnOptions(TypedDict, total=False):
    """How a driver runs its turn: the options :func:`run_in_turn` and :func:`stream_in_turn`
    share, declared once so that both drivers always take the same ones."""

    #: which Branch model the turn uses when the call passes none: ``"chat"`` (the default)
    #: or ``"parse"``
    role: ModelRole
    #: the operation's name, recorded on the turn's context (default None)
    operation: str | None
    #: False declares that the body starts no nested work (no ``scope.start_soon``), so its
    #: steps run without a task group (default True)
    nests: bool


_TURN_OPTIONS = TurnOptions.__optional_keys__


class DriverState(enum.Enum):
    """Where a turn's driver is. A coroutine turn goes NOT_STARTED, IN_STEP, FINALIZING, CLOSED;
    a stream turn alternates IN_STEP and BETWEEN_STEPS until it finalizes."""

    NOT_STARTED = "not started"
    IN_STEP = "in step"
    BETWEEN_STEPS = "between steps"
    FINALIZING = "finalizing"
    CLOSED = "closed"


# the states the stream driver reads and sets: an enum member looked up on its class costs as
# much as the rest of a quick step's bookkeeping
_NOT_STARTED = DriverState.NOT_STARTED
_IN_STEP = DriverState.IN_STEP
_BETWEEN_STEPS = DriverState.BETWEEN_STEPS
_FINALIZING = DriverState.FINALIZING
_CLOSED = DriverState.CLOSED


@dataclass(frozen=True, slots=True)
class StepOutcome(Generic[T]):
    """How one step of a turn ended: the body's value, or the exception it raised (including a
    cancellation delivered at the step's task-group exit)."""

    value: T | None = None
    error: BaseException | None = None

    @property
    def ended_cleanly(self) -> bool:
        """Whether the turn this ends is a ``RunEnd`` (no error, or a clean stop)."""
        return self.error is None or isinstance(
            self.error, StopAsyncIteration | StopStream | GeneratorExit
        )


def _unwrap(outcome: StepOutcome[T]) -> T:
    """The outcome's value, or raise its error. No frame left in the error's traceback keeps a
    reference to the outcome or the error, so a failed turn leaves no reference cycle."""
    value, error = outcome.value, outcome.error
    del outcome
    if error is not None:
        try:
            raise error
        finally:
            del error
    return value  # type: ignore[return-value]  # set whenever error is None


@dataclass(slots=True, eq=False)
class StepGroup:
    """One step of a turn (or one call that joined a stream turn between items), which is also
    the turn binding of the tasks running in it (the ``ContextVar`` a call on the Branch reads
    to find its turn): the Branch, the turn's scope, and the step's task group, whose children
    are the nested work started there. One record, so a step builds one object.

    ``group`` is None for a step run without one (an operation that starts no nested work).
    ``cancel_scope`` is what cancels the step (the group's own scope, or for a stream step
    without a group a scope of its own, or the turn's :class:`~lionagi._interrupt.Interrupt`
    for a guarded body's step); None for a coroutine step without a group. A binding that is
    no step (the one a finalizing turn sets for its terminal handlers) is never ``open``."""

    branch_id: UUID
    scope: TurnScope
    group: TaskGroup | None = None
    task_id: int = 0  # the task that opened it; alive (so the id is unique) while it is open
    cancel_scope: anyio.CancelScope | CancelHandle | Interrupt | None = None
    started: set[TaskHandle] | None = None  # the nested work started in it, once there is any
    open: bool = True


def _no_task() -> None:
    """A stream consumer's task before any task asked for an item: none, as a dead weak
    reference gives."""
    return None


@dataclass(slots=True, eq=False)
class StreamConsumer:
    """The task iterating a stream turn, held as a weak reference to the task: an identity that
    can never be reused by another task (a task id can, once its task is freed); before any
    task asked for an item, :func:`_no_task` (a reference to none).
    Tasks the consumer starts are other tasks: they queue for the Branch like anyone else."""

    task: Callable[[], object] = _no_task
    joinable: bool = False  # True only between items of a live, not abandoned, stream
    closed: bool = False
    # where the waits of an item's step register (a body that guards its waits, see
    # stream_in_turn), so aclose() from another task stops them without a cancel scope per step
    interrupt: Interrupt | None = None

    def bind(self) -> int:
        """Make the calling task the consumer (the task that asked for the latest item); its
        id (anyio's ``TaskInfo.id``)."""
        task = current_task()
        if self.task() is not task:
            self.task = weakref.ref(task)
        return id(task)

    def is_current(self) -> bool:
        return self.task() is current_task()


_active_turn_var: ContextVar[StepGroup | None] = _instrument.active_turn
# set while a task delivers one of a turn's message signals: its handlers must not wait for the
# turn's pending deliveries, which include the one running them
_delivering_var: ContextVar[bool] = ContextVar("lionagi_delivering_signal", default=False)
# the turn whose nested task (started with TurnScope.start_soon) this task is, or descends from
_member_var: ContextVar[TurnExecutionContext | None] = ContextVar(
    "lionagi_nested_member", default=None
)


class _Entry(enum.Enum):
    TOP_LEVEL = "top level"
    NESTED = "nested"  # the task-local binding names the live turn
    JOIN_STREAM = "join stream"  # the stream's consumer task, between items


# read on every top-level entry: an enum member looked up on its class costs ~0.9k instructions
_TOP_LEVEL = _Entry.TOP_LEVEL


# -- entry classification (ADR D2 state machine) -------------------------------------------
def _classify(branch: Branch) -> tuple[_Entry, TurnScope | None]:
    """How a call on ``branch`` enters, and the nested scope it would share.

    Raises TurnFinalizingError for a same-binding call while the turn is finalizing.
    """
    context = branch._active_turn_context
    if context is None:
        return _TOP_LEVEL, None
    binding = _active_turn_var.get()
    if binding is not None and binding.branch_id == branch.id and binding.scope.context is context:
        if context.phase == "active":
            return _Entry.NESTED, _scope_of(context, False)
        if context.phase == "finalizing":
            raise TurnFinalizingError(
                f"Branch {branch.id}: turn {context.turn_id} is finalizing; a call from the "
                "turn's own tasks (e.g. a terminal observer handler) cannot start a new turn "
                "until it has ended"
            )
        return _TOP_LEVEL, None
    consumer = context.consumer
    if (
        consumer is not None
        and consumer.joinable
        and context.phase == "active"
        and consumer.is_current()
    ):
        return _Entry.JOIN_STREAM, _scope_of(context, False)
    return _Entry.TOP_LEVEL, None


def current_scope(branch: Branch) -> TurnScope | None:
    """The live turn scope of the calling task on ``branch``, if any (for operation bodies)."""
    try:
        return _classify(branch)[1]
    except TurnFinalizingError:
        return None


# -- nested work -----------------------------------------------------------------------------
def start_nested(
    scope: TurnScope,
    fn: Callable[..., Awaitable[Any]],
    args: tuple[Any, ...],
    name: str | None,
) -> TaskHandle:
    """:meth:`TurnScope.start_soon`: start nested work in the calling step's task group."""
    context = scope.context
    step = _open_step(context, _active_turn_var.get())
    if context.phase != "active" or step is None:
        raise TurnFinalizingError(
            f"turn {context.turn_id} is {context.phase}; nested work can only start while "
            "the turn is active, from a step of the turn"
        )
    if step.group is None:
        raise ConfigurationError(
            f"turn {context.turn_id} ({context.operation}) runs without a task group: this "
            "operation starts no nested work; start it from a turn body of your own "
            "(run_in_turn) or in a task group you own"
        )
    task = step.group.start_soon(_run_nested_task, context, fn, args, name, name=name)
    handle = TaskHandle(task, name)
    if step.started is None:
        step.started = set()
    step.started.add(handle)
    context.nested_tasks.add(handle)
    return handle


def _open_step(context: TurnExecutionContext, binding: StepGroup | None) -> StepGroup | None:
    """The open step new nested work of ``context`` belongs to, from the calling task
    (``binding``: its turn binding, the step it runs in)."""
    if binding is not None and binding.open and binding.scope.context is context:
        return binding
    step = context.step_group
    return step if step is not None and step.open else None


async def _run_nested_task(
    context: TurnExecutionContext,
    fn: Callable[..., Awaitable[Any]],
    args: tuple[Any, ...],
    name: str | None,
) -> _Outcome:
    _member_var.set(context)
    try:
        return _Outcome(value=await fn(*args))
    except Exception as exc:
        logger.debug("nested task %r of turn %s failed", name, context.turn_id, exc_info=exc)
        return _Outcome(error=exc)


class _JoinedCall:
    """A call that joined a turn from a task the turn did not start: a cancel scope the turn can
    cancel and an event it can await (ADR D2's registration of nested entries)."""

    __slots__ = ("cancel_scope", "done")

    def __init__(self) -> None:
        self.cancel_scope = anyio.CancelScope()
        self.done = anyio.Event()

    def cancel(self) -> None:
        self.cancel_scope.cancel()

    async def join(self) -> None:
        if not self.done.is_set():
            await self.done.wait()


async def _cancel_and_join(work: set[NestedWork] | set[TaskHandle]) -> None:
    while work:
        pending = tuple(work)
        for item in pending:
            item.cancel()
        for item in pending:
            await item.join()
            work.discard(item)


async def _join_all(work: set[NestedWork]) -> None:
    while work:
        for item in tuple(work):
            await item.join()
            work.discard(item)


# -- message signals (ADR D3) ----------------------------------------------------------------
def schedule_message_signal(branch: Branch, message: Message) -> None:
    """Tell observers about ``message``: queued on the live turn, or detached best-effort.

    In a live turn (the task-local binding and the Branch pointer agree, the turn is not closed
    and a step of it is open, including while its nested work shuts down) the signal joins the
    turn's queue. The turn's own tasks deliver that queue in order, shielded from cancellation,
    at its next control point or at the end of the step, and always before the terminal signal;
    no task is started per message. Without a live turn the delivery is detached and never
    adopted by a later turn. Nothing is queued without an interested observer or event loop.
    Does not checkpoint.
    """
    observer = branch.observer
    if observer is None or not observer.wants(MessageAdded):
        return
    context = branch._active_turn_context
    binding = _active_turn_var.get()
    # (a binding to the Branch's live context is a binding of this Branch's turn)
    if (
        context is not None
        and context.phase != "closed"
        and binding is not None
        and binding.scope.context is context
        # the binding's own open step, else the turn's (what _open_step finds, without a call)
        and (binding.open or _open_step(context, binding) is not None)
    ):
        signal = _trusted[MessageAdded](
            branch_id=branch.id, message=message, turn_id=context.turn_id
        )
        context.pending_signals.append((observer, signal))
        return
    spawn_detached(observer.emit, _trusted[MessageAdded](branch_id=branch.id, message=message))


async def _drain_signals(context: TurnExecutionContext) -> None:
    """Deliver the turn's queued message signals from the calling task, in order, shielded.

    One task delivers at a time; another task of the turn that needs the queue empty waits for
    it. A handler's own calls (``_delivering_var`` is set while it runs) return at once: the
    queue they would wait for includes the delivery running them, which goes on to deliver
    whatever they queue.
    """
    while context.signals_pending:
        if _delivering_var.get():
            return
        if context.delivering:  # another task of the turn is delivering: wait for it
            if context.delivered is None:
                context.delivered = anyio.Event()
            with anyio.CancelScope(shield=True):
                await context.delivered.wait()
            continue
        rest = _deliver_queued(context)
        if rest is not None:
            await rest


def _drain(context: TurnExecutionContext) -> Awaitable[None] | None:
    """:func:`_drain_signals` without a coroutine when the queue's handlers are synchronous
    and no other task of the turn is delivering: ``None`` once it is done, otherwise an
    awaitable to await at once for the rest."""
    if _delivering_var.get():
        return None
    if not context.delivering:
        rest = _deliver_queued(context)
        if rest is not None:
            return _drain_after(rest, context)
    # (context.signals_pending, read without a property call)
    return _drain_signals(context) if context.delivering or context.pending_signals else None


async def _drain_after(rest: Awaitable[None], context: TurnExecutionContext) -> None:
    await rest
    await _drain_signals(context)


def _deliver_queued(context: TurnExecutionContext) -> Awaitable[None] | None:
    """Deliver the queue from the calling task until a handler returns an awaitable: ``None``
    when every signal was delivered, else an awaitable to await at once that awaits that
    handler and delivers the rest. From the first awaitable on, the delivery is marked
    (``delivering``, ``_delivering_var``, the step's interrupt disarmed) until it ends.

    Synchronous handlers run unmarked: nothing can wait on the queue or checkpoint while they
    run (no other task runs, and they have no wait of their own to keep off the interrupt), and
    a message they add is queued and delivered by this same loop."""
    rest = _send_queued(context)
    if rest is None:
        return None
    context.delivering = True
    token = _delivering_var.set(True)
    # the delivery is shielded: a handler's own waits must not register with the step's interrupt
    consumer = context.consumer
    interrupt = None if consumer is None else consumer.interrupt
    if interrupt is not None and interrupt.armed:
        interrupt.armed = False
    else:
        interrupt = None
    return _deliver_rest(context, rest, token, interrupt)


async def _deliver_rest(
    context: TurnExecutionContext,
    rest: Awaitable[None] | None,
    token: Token[bool],
    interrupt: Interrupt | None,
) -> None:
    try:
        while rest is not None:
            try:
                await rest
            except Exception:  # emit contains handler errors; guard the turn anyway
                logger.exception("message signal delivery failed in turn %s", context.turn_id)
            rest = _send_queued(context)
    finally:
        _end_delivery(context, token, interrupt)


def _send_queued(context: TurnExecutionContext) -> Awaitable[None] | None:
    """Send the queued signals in order until a handler returns an awaitable (returned)."""
    pending = context.pending_signals
    while pending:
        observer, signal = pending.popleft()
        try:
            rest = observer.send(signal, shielded=True)
        except Exception:  # emit contains handler errors; guard the turn anyway
            logger.exception("message signal delivery failed in turn %s", context.turn_id)
            continue
        if rest is not None:
            return rest
    return None


def _end_delivery(
    context: TurnExecutionContext, token: Token[bool], interrupt: Interrupt | None
) -> None:
    """End a delivery: re-arm the interrupt it disarmed, and wake a task waiting for it."""
    if interrupt is not None:
        interrupt.armed = True
    _delivering_var.reset(token)
    context.delivering = False
    delivered, context.delivered = context.delivered, None
    if delivered is not None:
        delivered.set()


def guard_wait(scope: TurnScope) -> AbstractContextManager[None]:
    """Around one wait of a stream body that passes ``guarded=True`` to :func:`stream_in_turn`
    (a tool batch, a model call's context providers): while an item's step runs without a
    cancel scope, the wait gets one that ``aclose()`` from another task cancels; it then raises
    out of the ``with`` block, and the turn ends. A no-op elsewhere."""
    consumer = scope.context.consumer
    interrupt = None if consumer is None else consumer.interrupt
    return _NO_GUARD if interrupt is None else interrupt.guard()


_NO_GUARD = nullcontext()


async def control_point(scope: TurnScope) -> None:
    """A control boundary of a turn (before a model call, between rounds or events, before a
    tool batch): deliver the turn's pending message signals first, so a directive an observer
    issues on one of them is seen here, then apply the pending directive (:func:`check_control`).

    Delivering checkpoints only inside async handlers, shielded from cancellation; from an
    observer handler (a message-signal delivery) the pending signals are not awaited: they
    include the delivery running the handler.
    """
    if scope.context.signals_pending:
        await _drain_signals(scope.context)
    check_control(scope)


# -- steps -------------------------------------------------------------------------------------
async def _in_step_group(
    branch: Branch,
    scope: TurnScope,
    body: Callable[[], Awaitable[T]],
    *,
    ends_turn: bool,
    grouped: bool = True,
    cancellable: bool = False,
    task_id: int | None = None,
    start: Callable[[], Awaitable[None] | None] | None = None,
) -> StepOutcome[T]:
    """Run ``body`` in a task group that owns the nested work it starts (``grouped``), or
    without one for a step that cannot start nested work (see :func:`run_in_turn`). A
    ``cancellable`` step (a stream's, which ``aclose()`` from another task may stop) without a
    group gets a cancel scope of its own; with a group, the group's scope is the step's.
    ``task_id`` is the calling task's id when the caller knows it. ``start`` (the turn's
    RunStart, see :meth:`_Turn._send_start`) is called inside the step right before the body,
    as if it were the body's first line.

    On the way out, unfinished nested work is cancelled and awaited and message signals are
    drained, shielded from cancellation. The body's exception (or a cancellation delivered at the
    group's exit) is returned, not raised. For the owner, a step that ends the turn (or fails)
    first moves the turn to "finalizing", which closes nested entry and control.
    """
    context = scope.context
    step: StepGroup | None = None
    outcome: StepOutcome[T] | None = None
    error: BaseException | None = None
    if task_id is None:
        task_id = id(current_task())
    try:
        if grouped:
            async with anyio.create_task_group() as group:
                step = StepGroup(branch.id, scope, group, task_id, group.cancel_scope)
                outcome = await _run_step(branch, scope, step, body, ends_turn, start)
        else:
            if cancellable:
                cancel_scope = new_cancel_scope()
                with cancel_scope:
                    step = StepGroup(branch.id, scope, None, task_id, cancel_scope)
                    outcome = await _run_step(branch, scope, step, body, ends_turn, start)
            else:
                step = StepGroup(branch.id, scope, None, task_id)
                outcome = await _run_step(branch, scope, step, body, ends_turn, start)
            if outcome is not None and outcome.error is not None:
                # the event loop holds a cancellation it delivered (with its traceback, so the
                # turn's frames) until the task next yields; a task group's exit would yield here
                await cancel_shielded_checkpoint()
    except BaseException as exc:  # a cancellation delivered at the task group's exit
        error = exc
    finally:
        if step is not None:
            step.open = False
            if scope.owns_lifecycle and context.step_group is step:
                context.step_group = None
    try:
        if outcome is not None and (outcome.error is not None or error is None):
            return outcome  # the body's own error wins over one raised at the group's exit
        return StepOutcome(None if outcome is None else outcome.value, error)
    finally:
        error = outcome = None  # this frame is in the error's traceback: no cycle through it


async def _run_step(
    branch: Branch,
    scope: TurnScope,
    step: StepGroup,
    body: Callable[[], Awaitable[T]],
    ends_turn: bool,
    start: Callable[[], Awaitable[None] | None] | None = None,
) -> StepOutcome[T]:
    context = scope.context
    owner = scope.owns_lifecycle
    value: T | None = None
    error: BaseException | None = None
    token = _active_turn_var.set(step)
    traced = None if _instrument.tracer is None else _instrument.turn_step(branch, context)
    try:
        if owner:
            context.step_group = step
        try:
            if start is not None:  # RunStart: its failure or cancellation is the step's
                rest = start()
                if rest is not None:
                    await rest
            value = await body()
        except BaseException as exc:  # handed back to the caller, re-raised after cleanup
            error = exc
        if owner and (ends_turn or error is not None):
            context.phase = "finalizing"
        # the owner's step ends all nested work of the turn; a joined call ends its own
        pending = context.nested_tasks if owner else step.started
        # idle (context.signals_pending, read without a property call), the step ends without
        # a coroutine; with only message signals queued, so does their synchronous delivery
        if pending or context.delivering:
            await _step_cleanup(context, pending)
        elif context.pending_signals:
            rest = _drain(context)
            if rest is not None:
                await rest
    finally:
        _active_turn_var.reset(token)
        if traced is not None:  # a joined call's failure is not the turn's
            _instrument.turn_step_done(traced, error if owner else None, ends_turn)
    try:
        return StepOutcome(value, error)
    finally:
        error = None  # this frame is in the error's traceback: no cycle through its locals


async def _step_cleanup(context: TurnExecutionContext, pending: set[Any] | None) -> None:
    """The end of a step: cancel and await its unfinished nested work (``pending``: all of the
    turn's, for the owner's step), shielded, then deliver the turn's message signals."""
    if pending:  # skip the shielded scope when idle
        mine = () if pending is context.nested_tasks else tuple(pending)
        with anyio.CancelScope(shield=True):
            await _cancel_and_join(pending)
            context.nested_tasks.difference_update(mine)
    if context.signals_pending:
        rest = _drain(context)
        if rest is not None:
            await rest


async def _end_quick_step(context: TurnExecutionContext, error: BaseException | None) -> None:
    """What a quick stream step rarely needs at its end, inside it: after ``error`` the turn
    is finalizing (nothing joins it any more); then :func:`_step_cleanup`."""
    if error is not None:
        context.phase = "finalizing"
    await _step_cleanup(context, context.nested_tasks)


async def _run_nested(
    branch: Branch, entry: _Entry, scope: TurnScope, body: Callable[[], Awaitable[T]]
) -> T:
    """Run a nested call. From a task of the turn (the step's own task, or nested work the turn
    started) it runs as is; from any other task it is registered as nested work, so
    finalization can cancel and await it (it then fails with TurnFinalizingError). A stream
    consumer's call between items gets a task group of its own for the work it starts."""
    context = scope.context
    if entry is _Entry.NESTED and _is_turn_task(context):
        return await body()
    call = _JoinedCall()
    context.nested_tasks.add(call)
    try:
        with call.cancel_scope:
            if entry is _Entry.JOIN_STREAM:
                return _unwrap(await _in_step_group(branch, scope, body, ends_turn=False))
            return await body()
        raise TurnFinalizingError(
            f"turn {context.turn_id} finalized while this call was running; work that joins "
            "a turn cannot outlive it"
        )
    finally:
        context.nested_tasks.discard(call)
        call.done.set()


def _is_turn_task(context: TurnExecutionContext) -> bool:
    if _member_var.get() is context:
        return True
    binding = _active_turn_var.get()
    return binding is not None and binding.open and binding.task_id == id(current_task())


# -- the top-level turn -----------------------------------------------------------------------
class _TurnRecord:
    """One top-level turn between lock acquisition and release: its state (set by
    :meth:`_hold`) and what runs it. Internal to this module. Its fields are slots of the
    concrete class: :class:`_Turn` for a coroutine turn, the stream's own driver for a stream
    turn (one object less per stream)."""

    if not TYPE_CHECKING:  # the fields are the subclasses' slots (mypy takes them as declared)
        __slots__ = ()
    branch: Branch
    context: TurnExecutionContext
    lock: Any
    grouped: bool  # whether its steps run in a task group (the body nests)
    # the observer the turn starts with is the one told of its end: a Branch added to or
    # removed from a Session meanwhile gets no terminal without its start, nor the reverse
    observer: Observer | None
    scope: TurnScope
    started: float  # the turn's perf counter at its start (only told to that observer)
    _released: bool

    def _hold(self, context: TurnExecutionContext, lock: Any, grouped: bool) -> None:
        """Start the turn of ``context``, whose Branch's ``lock`` the caller holds."""
        self.context = context
        self.lock = lock
        self.grouped = grouped
        self.observer = observer = self.branch.observer
        self.scope = _scope_of(context, True)
        self.started = 0.0 if observer is None else time.perf_counter()
        self._released = False

    def step(
        self,
        body: Callable[[], Awaitable[T]],
        *,
        first: bool,
        ends_turn: bool,
        cancellable: bool = False,
        task_id: int | None = None,
    ) -> Awaitable[StepOutcome[T]]:
        """Run one step of the turn (the first one emits ``RunStart`` before the body, when an
        observer wants it). Returns the step's coroutine: awaiting it runs the step."""
        run = body
        observer = self.observer
        if first and observer is not None and observer.wants(RunStart):
            start: Callable[[], Awaitable[None] | None] | None = self._send_start
        else:
            start = None
        return _in_step_group(
            self.branch,
            self.scope,
            run,
            ends_turn=ends_turn,
            grouped=self.grouped,
            cancellable=cancellable,
            task_id=task_id,
            start=start,
        )

    async def finish(
        self,
        outcome: StepOutcome[Any],
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Finalize the turn, shielded (ADR D4): ``close`` (a stream's body) runs as a last step
        whose nested work is cancelled and whose signals are drained, then the one terminal
        signal, the report, phase "closed", the pointer and the lock."""
        context = self.context
        context.phase = "finalizing"
        if close is None and not context.signals_pending and self.observer is None:
            self.release()  # nothing to run, deliver or tell
            return
        # bound while finalizing, so a terminal handler's call on the Branch is recognised
        token = _active_turn_var.set(StepGroup(self.branch.id, self.scope, open=False))
        try:
            if close is None and not context.signals_pending:
                # nothing to await but the terminal's async handlers, which emit shields: no
                # shielded scope needed
                await _emit_terminal(self.branch, context, self.observer, self.started, outcome)
                return
            with anyio.CancelScope(shield=True):
                if close is not None:
                    closed = await _in_step_group(
                        self.branch, self.scope, close, ends_turn=True, grouped=self.grouped
                    )
                    if closed.error is not None and outcome.error is None:
                        logger.error("closing stream turn %s failed", context.turn_id)
                await _drain_signals(context)  # signals raised after the step closed are ours
                await _emit_terminal(self.branch, context, self.observer, self.started, outcome)
        finally:
            _active_turn_var.reset(token)
            self.release()

    async def _emit_start(self) -> None:
        rest = self._send_start()
        if rest is not None:
            await rest

    def _send_start(self) -> Awaitable[None] | None:
        """Send ``RunStart`` (see :func:`_send_start`)."""
        return _send_start(self.branch, self.context, self.observer)

    def release(self) -> None:
        """Close the context and release the lock (once)."""
        if self._released:
            return
        self._released = True
        _close_context(self.branch, self.context, self.lock)


class _Turn(_TurnRecord):
    """A coroutine turn's :class:`_TurnRecord`."""

    __slots__ = (
        "_released",
        "branch",
        "context",
        "grouped",
        "lock",
        "observer",
        "scope",
        "started",
    )

    def __init__(
        self, branch: Branch, context: TurnExecutionContext, lock: Any, grouped: bool
    ) -> None:
        self.branch = branch
        self._hold(context, lock, grouped)

    @classmethod
    async def begin(cls, branch: Branch, model: iModel | None, options: TurnOptions) -> _Turn:
        lock = branch._turn_lock
        loop, task, cancelled = running()
        if cancelled or not lock.take_in(loop):  # taken at once when free (and not cancelled)
            await lock.acquire()  # cancelled while waiting: nothing was created, nothing to undo
        return cls.holding(branch, model, options, lock, task)

    @classmethod
    def holding(
        cls, branch: Branch, model: iModel | None, options: TurnOptions, lock: Any, task: object
    ) -> _Turn:
        """The turn of a caller (``task``, its native task) that holds ``branch``'s ``lock``:
        its context is opened (on failure the lock is released)."""
        context = _open_context(branch, model, options, lock, task)
        return cls(branch, context, lock, options.get("nests", True))


def _send_start(
    branch: Branch, context: TurnExecutionContext, observer: Observer | None
) -> Awaitable[None] | None:
    """Send the turn's ``RunStart`` to ``observer`` (the one the turn started with), when it
    wants it. Like :meth:`Observer.send`: an awaitable to await at once, when a handler
    returned one."""
    if observer is None or not observer.wants(RunStart):
        return None
    # Not shielded: a RunStart handler that blocks is cancelled with the caller, and the turn
    # then ends with its one RunFailed.
    return observer.send(
        _trusted[RunStart](
            branch_id=branch.id,
            turn_id=context.turn_id,
            operation=context.operation,
            op_id=current_op_id.get(),
        )
    )


async def _emit_terminal(
    branch: Branch,
    context: TurnExecutionContext,
    observer: Observer | None,
    started: float,
    outcome: StepOutcome[Any],
) -> None:
    """Send the turn's one terminal signal (``RunEnd`` or ``RunFailed``, as ``outcome``
    ended) to ``observer``, the one the turn started with (``started``: its perf counter);
    a failure is logged, never raised."""
    if observer is None:
        return
    ended = outcome.ended_cleanly
    if not observer.wants(RunEnd if ended else RunFailed):
        return
    # one terminal signal: its class and its own fields follow the outcome; the turn's
    # fields come first and the duration last in both (their field order)
    kind: type[RunEnd | RunFailed]
    own: tuple[Any, ...]
    if ended:
        usage = context.usage
        kind = RunEnd
        own = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cost_usd or 0.0,
            context.model_calls,
            context.model_attempts,
        )
    else:
        kind = RunFailed
        own = (outcome.error,)
    signal: RunEnd | RunFailed = _trusted_values[kind](
        (
            branch.id,
            time.time(),
            context.turn_id,
            context.operation,
            current_op_id.get(),
            *own,
            (time.perf_counter() - started) * 1000.0,
        )
    )
    try:
        rest = observer.send(signal, shielded=True)
        if rest is not None:
            await rest
    except Exception:  # the terminal attempt is made once; its failure is diagnostic
        logger.exception("terminal signal of turn %s failed", context.turn_id)


def _open_context(
    branch: Branch, model: iModel | None, options: TurnOptions, lock: Any, owner: object
) -> TurnExecutionContext:
    """The context of a top-level turn of task ``owner`` (:func:`current_task`'s) that holds
    ``lock`` (the Branch's turn lock), with the Branch pointing at it. On failure (no model to
    use) the lock is released."""
    try:
        role = options.get("role", "chat")
        resolved = model
        if resolved is None:
            resolved = branch.parse_model if role == "parse" else branch.chat_model
        if resolved is None:
            raise ConfigurationError(
                f"Branch {branch.name or branch.id} has no {role} model; pass "
                f"{'parse_model' if role == 'parse' else 'chat_model'}=iModel(...) to the "
                "Branch or a model to the call"
            )
        context = TurnExecutionContext(new_id_int(), resolved, owner)
        context.operation = options.get("operation")
        context.logs = branch.logs
        assert branch._active_turn_context is None, "turn lock held by two turns"
        branch._active_turn_context = context
    except BaseException:
        lock.release()
        raise
    return context


def _close_context(branch: Branch, context: TurnExecutionContext, lock: Any) -> None:
    """The end of a top-level turn: publish its report, phase "closed", clear the Branch's
    pointer, close its trace, release the lock. Call once, after the terminal (if any)."""
    branch._last_context_report = context.provider_report
    context.phase = "closed"
    context.pending_signals.clear()
    context.consumer = None
    context.stream_body = None
    if branch._active_turn_context is context:
        branch._active_turn_context = None
    if context.trace is not None:  # a tracer saw the turn
        context.trace.close()
    lock.release()


# -- public drivers ---------------------------------------------------------------------------
async def run_in_turn(
    branch: Branch,
    *,
    model: iModel | None,
    invoke: Callable[[TurnScope], Awaitable[T]],
    **options: Unpack[TurnOptions],
) -> T:
    """Run ``invoke(scope)`` as a turn of ``branch`` and return its result unchanged.

    A top-level call waits for the Branch (FIFO), emits ``RunStart`` and exactly one terminal
    signal; a nested call (from inside a live turn of this Branch, or from a stream's consumer
    between items) runs at once in the same scope. ``model`` overrides the Branch's ``role``
    model for this turn only; ``options`` are the :class:`TurnOptions`. Cancel-safe: cancelled
    while waiting, nothing happened; cancelled after the start, the turn ends with
    ``RunFailed`` (shielded finalization) and the cancellation propagates.

    ``nests=False`` declares that the body starts no nested work (no ``scope.start_soon``): the
    turn then runs without a task group, which is what an anyio task group costs a short turn.
    ``scope.start_soon`` from code running inside such a turn (an observer's handler, a context
    provider, a tool, a model function) raises ConfigurationError; that code starts concurrent
    work in a task group of its own. The library's operations that start no nested work (chat,
    chat_and_record, communicate and the stream operations) pass it.
    """
    if not _TURN_OPTIONS.issuperset(options):
        raise unexpected_keywords("run_in_turn", options, _TURN_OPTIONS)
    entry, nested = _classify(branch)
    if nested is not None:
        return await _run_nested(branch, entry, nested, lambda: invoke(nested))
    if options.get("nests") is False and _instrument.tracer is None:  # traced: general steps
        return await _run_one_frame(branch, model, options, invoke)
    turn = await _Turn.begin(branch, model, options)
    try:
        outcome = await turn.step(
            partial(invoke, turn.scope), first=True, ends_turn=True, task_id=id(turn.context.owner)
        )
        await turn.finish(outcome)
    finally:
        turn.release()
    try:
        return _unwrap(outcome)
    finally:
        del outcome  # it holds the error, whose traceback holds this frame: no cycle


async def _run_one_frame(
    branch: Branch,
    model: iModel | None,
    options: TurnOptions,
    invoke: Callable[[TurnScope], Awaitable[T]],
) -> T:
    """A top-level coroutine turn whose body starts no nested work (``nests=False``):
    :class:`_Turn`'s begin, one ungrouped step and finish in one frame, with the same
    guarantees (FIFO lock, context and binding, ``start_soon`` refused, nested entries from
    other tasks cancelled and awaited, shielded cleanup, binding reset and lock released on
    every way out). Only while no tracer is installed: a traced turn takes the general path,
    whose step is traced.

    Observed, it is the general turn's shape too: ``RunStart`` is sent from the step right
    before the body (its failure or cancellation is the step's), message signals are delivered
    at the end of the step, and the one terminal goes, after every message signal, to the
    observer the turn started with, with the binding set (a terminal handler's call on the
    Branch is recognised as the finalizing turn's) and shielded when anything is left to
    deliver first. A turn that starts unobserved emits no lifecycle signal, even if an
    observer appears while it runs (no terminal without its start); message signals queued by
    such an observer are delivered before the lock is released.
    """
    lock = branch._turn_lock
    loop, task, cancelled = running()
    if cancelled or not lock.take_in(loop):  # taken at once when free (and not cancelled)
        await lock.acquire()  # cancelled while waiting: nothing was created, nothing to undo
    context = _open_context(branch, model, options, lock, task)
    observer = branch.observer  # told of the end if told of the start
    started = 0.0 if observer is None else time.perf_counter()
    try:
        scope = _scope_of(context, True)
        step = StepGroup(branch.id, scope, None, id(context.owner))
        context.step_group = step
        token = _active_turn_var.set(step)
        value: T | None = None
        error: BaseException | None = None
        try:
            try:
                if observer is not None:
                    rest = _send_start(branch, context, observer)
                    if rest is not None:
                        await rest
                value = await invoke(scope)
            except BaseException as exc:  # re-raised once the turn is closed
                error = exc
            context.phase = "finalizing"
            if context.nested_tasks or context.delivering:
                await _step_cleanup(context, context.nested_tasks)
            elif context.pending_signals:  # only message signals: synchronous handlers
                rest = _drain(context)  # are delivered without a coroutine
                if rest is not None:
                    await rest
        finally:
            _active_turn_var.reset(token)
            step.open = False
            context.step_group = None
        if error is not None:
            # the event loop holds a cancellation it delivered (with its traceback, so the
            # turn's frames) until the task next yields
            await cancel_shielded_checkpoint()
        if observer is not None or context.delivering or context.pending_signals:
            # bound while finalizing, so a terminal handler's call on the Branch is recognised
            token = _active_turn_var.set(StepGroup(branch.id, scope, open=False))
            try:
                if context.delivering or context.pending_signals:  # queued after the step
                    with anyio.CancelScope(shield=True):
                        await _drain_signals(context)
                        await _emit_terminal(
                            branch, context, observer, started, StepOutcome(None, error)
                        )
                elif observer is not None:
                    # the terminal's async handlers are shielded by the observer's send
                    await _emit_terminal(
                        branch, context, observer, started, StepOutcome(None, error)
                    )
            finally:
                _active_turn_var.reset(token)
    finally:
        _close_context(branch, context, lock)
    if error is not None:
        try:
            raise error
        finally:
            error = None  # this frame is in the error's traceback: no cycle through it
    return value  # type: ignore[return-value]  # set whenever error is None


class _StreamDriver(StreamConsumer, _TurnRecord, Generic[T]):
    """The state machine behind one :class:`TurnStream`. It holds no reference to the stream
    object, so dropping the stream frees it by reference counting and reports the abandonment.

    It is also its turn's :class:`StreamConsumer` record (the context's ``consumer`` while the
    turn is open, cleared when it ends) and, once the turn began, its :class:`_TurnRecord`:
    two objects less to build per stream."""

    __slots__ = (
        "_begun",
        "_close_requested",
        "_closed",
        "_entry",
        "_items",
        "_loop",
        "_quick",
        "_released",
        "_scope",
        "_task",
        "branch",
        "context",
        "grouped",
        "invoke",
        "lock",
        "model",
        "observer",
        "options",
        "scope",
        "started",
        "state",
    )
    # whether the turn began (its _TurnRecord fields are set); a stream inside another turn
    # never begins one (it finds that turn's scope)
    _begun: bool
    _scope: TurnScope | None  # the nested scope, for a stream inside a turn
    _items: AsyncIterator[T] | None  # the body, started at the first item's step
    _loop: object  # the native event loop (lionagi._compat.current_loop's)
    _closed: anyio.Event | None  # set when the turn ended, for aclose() calls that wait for it
    # what every quick step of an ungrouped turn needs: its context, and the one step record
    # (the steps' binding too) they all share
    _quick: tuple[TurnExecutionContext, StepGroup] | None
    # current_task for the turn's loop, built at the second item (the first one runs in the
    # task that began the turn)
    _task: Callable[[], object] | None

    def __init__(
        self,
        branch: Branch,
        model: iModel | None,
        invoke: Callable[[TurnScope], AsyncIterator[T]],
        options: TurnOptions,
        interrupt: Interrupt | None,
    ) -> None:
        """``interrupt``: where the waits of a guarded body's steps register (see
        :func:`stream_in_turn`), or None."""
        self.branch = branch
        self.model = model
        self.invoke = invoke
        self.options = options
        # not joinable, not closed, no close asked for (joinable and closed: the
        # StreamConsumer record, see there)
        self.joinable = self.closed = self._close_requested = False
        self.state = _NOT_STARTED
        self.task = _no_task
        self.interrupt = interrupt
        self._entry = _TOP_LEVEL
        # nothing yet (see the declarations above)
        self._begun = False
        self._loop = self._quick = self._task = None
        self._scope = self._items = self._closed = None

    # -- iteration ------------------------------------------------------------------------
    async def next(self) -> T:
        state = self.state
        if state is _NOT_STARTED:
            # still NOT_STARTED: the steps are full ones; None: the Branch is busy
            begun = self._begin()
            state = await self._begin_after_wait() if begun is None else begun
        quick = self._quick
        if state is not _BETWEEN_STEPS or quick is None:
            return await self._full_step(state)
        # A step of an ungrouped turn (the first one once the turn has begun): one step record
        # (also the binding) serves them all, and a body that guards its waits opens no cancel scope
        # (its waits register theirs with the consumer's interrupt, which aclose() cancels).
        # Only what every item needs runs here; the first item, errors and cleanup are helpers.
        context, step = quick
        if context.nested_tasks or _instrument.tracer is not None:
            return await self._full_step(state)
        items = self._items  # None at the first item: the step starts the body
        # at the first item, the task that began the turn (this call)
        task = context.owner if items is None else (self._task or self._task_lookup())()
        if self.task() is not task:
            self.task = weakref.ref(task)
        self.state = _IN_STEP
        self.joinable = False
        step.task_id = id(task)
        step.open = True
        context.step_group = step
        interrupt = self.interrupt
        error: BaseException | None = None
        token = _active_turn_var.set(step)
        try:
            if interrupt is None:
                value, error = await self._scoped_item(step, items)
            else:
                interrupt.armed = True
                try:
                    value = await (self._first_item() if items is None else items.__anext__())
                except BaseException as exc:
                    error = exc
                interrupt.armed = False
            if (
                error is not None
                or context.nested_tasks
                or context.pending_signals
                or context.delivering
            ):
                await _end_quick_step(context, error)
        finally:
            _active_turn_var.reset(token)
            step.open = False
            context.step_group = None
        if error is None and not self._close_requested:
            self.state = _BETWEEN_STEPS
            self.joinable = True
            return value
        try:
            return await self._failed_step(error)
        finally:
            error = None  # this frame is in the error's traceback: no cycle through it

    def _begin(self) -> DriverState | None:
        """Start the turn if the Branch is free, or find the live turn this stream nests in,
        without a coroutine (the first item of nearly every stream). BETWEEN_STEPS when the
        steps are quick ones (an ungrouped top-level turn, no tracer): the first is then run by
        :meth:`next` itself; NOT_STARTED for :meth:`_full_step` to start; None when the
        Branch's lock must be waited for (:meth:`_begin_after_wait`), nothing changed."""
        branch = self.branch
        try:
            if branch._active_turn_context is not None:  # busy, or a turn this one nests in
                entry, nested = _classify(branch)
                if nested is not None:
                    self._entry, self._scope = entry, nested
                    return _NOT_STARTED
            lock = branch._turn_lock
            loop, task, cancelled = running()  # before the lock: nothing to undo if it failed
            if cancelled or not lock.take_in(loop):  # taken at once when free (not cancelled)
                return None
            return self._began(lock, loop, task)
        except BaseException:  # no model, or a finalizing turn's own call: nothing started
            self._refused()
            raise

    async def _begin_after_wait(self) -> DriverState:
        """:meth:`_begin` for a Branch that was busy: wait for its lock (FIFO), then start."""
        lock = self.branch._turn_lock
        try:
            loop, task, _ = running()
            await lock.acquire()  # cancelled while waiting: nothing was created, nothing to undo
            return self._began(lock, loop, task)
        except BaseException:
            self._refused()
            raise

    def _began(self, lock: Any, loop: object, task: object) -> DriverState:
        """Begin the turn of ``task`` on ``loop`` (:func:`running`'s), which holds ``lock``
        (as :meth:`_Turn.holding` does) and, for an ungrouped turn, make the one step record
        (also the binding) of its quick steps."""
        self._loop = loop
        branch, options = self.branch, self.options
        context = _open_context(branch, self.model, options, lock, task)
        context.consumer = self
        self._hold(context, lock, options.get("nests", True))
        self._begun = True
        if self.grouped:
            return _NOT_STARTED
        # the task id is set by each step (the consumer's task may change)
        self._quick = (context, StepGroup(branch.id, self.scope, None, 0, self.interrupt))
        if _instrument.tracer is not None:
            return _NOT_STARTED
        self.state = _BETWEEN_STEPS
        return _BETWEEN_STEPS

    def _task_lookup(self) -> Callable[[], object]:
        """The loop's :func:`current_task` (:func:`loop_and_task_lookup`), kept for the items
        after the first."""
        self._task = lookup = loop_and_task_lookup()[1]
        return lookup

    def _refused(self) -> None:
        self.state = _CLOSED
        self.closed = True

    async def _scoped_item(
        self, step: StepGroup, items: AsyncIterator[T] | None
    ) -> tuple[T, BaseException | None]:
        """One item of a body that does not guard its own waits, in a cancel scope of the
        step's (which aclose() cancels): the item and None, or a placeholder and the error that
        ended it (caught inside the scope, which would otherwise swallow its own cancellation)."""
        with (cancel_scope := new_cancel_scope()):
            step.cancel_scope = cancel_scope
            try:
                return await (self._first_item() if items is None else items.__anext__()), None
            except BaseException as exc:
                return cast("T", None), exc
        raise AssertionError("unreachable: the scope's own cancellation is caught inside it")

    def _first_item(self) -> Awaitable[T]:
        """The body of an ungrouped turn's first step, to await at once: ``RunStart`` (when
        the observer the turn started with wants it), then the body's first item. An unguarded
        body runs it in the step's cancel scope; a guarded body's RunStart handlers make
        guarded waits. Without RunStart to send, it is the body's own first step: no coroutine
        of its own between the consumer and the body."""
        observer = self.observer
        if observer is not None and observer.wants(RunStart):
            return self._first_item_after_start()
        # _open_items, without its frame
        self._items = self.context.stream_body = items = aiter(self.invoke(self.scope))
        return anext(items)

    async def _first_item_after_start(self) -> T:
        with guard(self.interrupt):
            await self._emit_start()
        return await anext(self._open_items())

    def _open_items(self) -> AsyncIterator[T]:
        """Start the body (at the first item's step): its iterator, also the turn's."""
        self._items = self.context.stream_body = items = aiter(self.invoke(self.scope))
        return items

    async def _failed_step(self, error: BaseException | None) -> T:
        """End the turn after a quick step that failed or was closed from another task."""
        if error is not None:
            await cancel_shielded_checkpoint()  # see _in_step_group
        if self._close_requested:
            await self._finish(StepOutcome())
            raise StopAsyncIteration
        outcome: StepOutcome[T] = StepOutcome(error=error)
        del error
        return await self._ended(outcome)

    async def _full_step(self, state: DriverState) -> T:
        if state is _IN_STEP:
            raise RuntimeError("this stream is already being iterated by another task")
        if state in (_FINALIZING, _CLOSED):
            raise StopAsyncIteration
        task_id = self.bind()
        if not self._begun:  # a stream nested in another turn
            assert self._scope is not None
            return await self._next_nested(self._entry, self._scope)
        self.state = _IN_STEP
        self.joinable = False
        try:
            outcome = await self.step(
                self._advance,
                first=state is _NOT_STARTED,
                ends_turn=False,
                cancellable=True,
                task_id=task_id,
            )
        except BaseException:  # the step itself never raises; guard the invariant anyway
            await self._finish(StepOutcome(error=None))
            raise
        if self._close_requested:  # aclose() from another task cancelled this step
            await self._finish(StepOutcome())
            raise StopAsyncIteration
        if outcome.error is not None:
            return await self._ended(outcome)
        self.state = _BETWEEN_STEPS
        self.joinable = True
        return outcome.value  # type: ignore[return-value]  # set whenever error is None

    async def _ended(self, outcome: StepOutcome[T]) -> T:
        """End the turn after a step that raised: stop the stream, or re-raise."""
        await self._finish(outcome)
        if outcome.ended_cleanly:
            raise StopAsyncIteration
        try:
            return _unwrap(outcome)
        finally:
            del outcome

    async def _advance(self) -> T:
        context = self.context
        if context.nested_tasks:  # calls that joined between items finish before the next one
            await _join_all(context.nested_tasks)
        items = self._items
        if items is None:
            items = self._open_items()
        return await anext(items)

    async def _next_nested(self, entry: _Entry, scope: TurnScope) -> T:
        self._scope = scope
        if self._items is None:
            self._items = aiter(self.invoke(scope))
        self.state = _IN_STEP
        items = self._items
        try:
            value = await _run_nested(self.branch, entry, scope, lambda: anext(items))
        except BaseException:
            self.state = _CLOSED
            await _close_items(items)
            raise
        self.state = _BETWEEN_STEPS
        return value

    # -- closing ----------------------------------------------------------------------------
    async def aclose(self) -> None:
        state = self.state
        if state is _CLOSED:
            return
        if state is _NOT_STARTED:
            self.state = _CLOSED
            self.closed = True
            return
        if not self._begun:  # nested in another turn: only the body is ours to close
            self.state = _CLOSED
            with anyio.CancelScope(shield=True):
                await _close_items(self._items)
            return
        if state is _BETWEEN_STEPS:
            await self._finish(StepOutcome())
            return
        # IN_STEP in another task, or FINALIZING: stop the step, wait for the turn to end
        if self._closed is None:
            self._closed = anyio.Event()
        if state is _IN_STEP:
            self._close_requested = True
            step = self.context.step_group
            if step is not None and step.cancel_scope is not None:
                step.cancel_scope.cancel()
        binding = _active_turn_var.get()
        if binding is not None and binding.scope.context is self.context:
            return  # called from the turn's own work: waiting for the step would deadlock
        with anyio.CancelScope(shield=True):
            await self._closed.wait()

    async def _finish(self, outcome: StepOutcome[Any]) -> None:
        assert self._begun
        self.state = _FINALIZING
        self.joinable = False
        self.closed = True
        try:
            await self.finish(outcome, None if self._items is None else self._close_items)
        finally:
            self.state = _CLOSED
            self._items = None
            if self._closed is not None:
                self._closed.set()

    async def _close_items(self) -> None:
        await _close_items(self._items)

    def abandon(self) -> None:
        """The stream object was dropped: end its turn on the loop it ran on (never joins again).

        Called from ``__del__``, so it only schedules; if that loop has ended, the turn is
        released at once (nothing can be awaited any more, so no terminal signal is sent).
        """
        if self.state is not _BETWEEN_STEPS or not self._begun:
            if self.state is _NOT_STARTED:
                self.state = _CLOSED
            self.closed = True
            return
        self.joinable = False
        self.closed = True
        assert self._loop is not None
        if not spawn_threadsafe(self._loop, self.aclose):
            self.state = _CLOSED
            self.release()


async def _close_items(items: AsyncIterator[Any] | None) -> None:
    close = getattr(items, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception:  # ADR D4: an ordinary exception from close is logged and suppressed
        logger.exception("closing a stream body failed")


class TurnStream(Generic[T]):
    """A stream turn: an async iterator that is also an async context manager.

    Use it as ``async with branch.run(...) as stream: async for item in stream: ...``. The turn
    starts at the first item (creating or entering the stream acquires nothing) and ends, with
    one ``RunEnd``, when the block exits, however it exits; an error or cancellation inside an
    item's step ends it with ``RunFailed``. The bare ``async for item in branch.run(...)`` form
    works too, but a ``break`` leaves the turn open (holding the Branch) until the stream object
    is closed or dropped: dropping it finalizes the turn on its event loop, and nothing calls
    into it any more.

    Between items, calls on the Branch from the consumer (the task that asked for the latest
    item) join the turn as registered nested work: the next item waits for them and closing the
    stream cancels and awaits them. Calls from any other task wait for the turn to end.
    ``aclose()`` may be called from any task; while another task is inside an item it cancels
    that item, and returns once the turn ended.
    """

    __slots__ = ("__weakref__", "_driver")

    def __init__(self, driver: _StreamDriver[T]) -> None:
        self._driver = driver

    @property
    def state(self) -> DriverState:
        """Where the stream's turn is (see :class:`DriverState`)."""
        return self._driver.state

    def __aiter__(self) -> TurnStream[T]:
        return self

    def __anext__(self) -> Awaitable[T]:
        """The next item. Checkpoints; the first call waits for the Branch (FIFO)."""
        return self._driver.next()

    async def __aenter__(self) -> TurnStream[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """End the turn now: close the body (the provider stream with it), cancel and await
        work that joined it, deliver its signals, emit ``RunEnd`` and release the Branch.

        Shielded: finishes even when the caller is cancelled. Idempotent.
        """
        await self._driver.aclose()

    def __del__(self) -> None:
        try:
            self._driver.abandon()
        except Exception:  # never raise from a finalizer
            logger.exception("finalizing an abandoned stream turn failed")


def guarded_stream(
    branch: Branch,
    model: iModel | None,
    invoke: Callable[[TurnScope], AsyncIterator[T]],
    options: TurnOptions,
) -> TurnStream[T]:
    """``stream_in_turn(branch, model=model, invoke=invoke, guarded=True, **options)`` for
    the library's own guarded stream bodies, whose ``options`` are one checked mapping (with
    ``nests=False``) kept for every call and never changed: no keyword dict and no check of it
    per stream."""
    return TurnStream(_StreamDriver(branch, model, invoke, options, Interrupt()))


def stream_in_turn(
    branch: Branch,
    *,
    model: iModel | None,
    invoke: Callable[[TurnScope], AsyncIterator[T]],
    guarded: bool = False,
    **options: Unpack[TurnOptions],
) -> TurnStream[T]:
    """Iterate ``invoke(scope)`` as one turn of ``branch``, holding the turn until the end.

    Creating the stream does nothing; the turn starts at the first ``__anext__``. Exhaustion,
    ``StopStream``, ``aclose()``, leaving its ``async with`` block and dropping it end the turn
    with ``RunEnd``; an exception or cancellation with ``RunFailed`` (re-raised). The body's own
    generator is closed before the terminal signal.

    Each item is one step of the turn. ``nests=False`` declares that the body starts no nested
    work (no ``scope.start_soon``); as for :func:`run_in_turn`, the steps then run without a
    task group. Every step has one cancel scope (the group's, or its own), which ``aclose()``
    from another task cancels.

    ``guarded=True`` (with ``nests=False``) declares that every wait of the body outside a
    shielded scope is guarded: the model streams it opens through ``scope.stream_model`` (the
    context providers, the opening and each chunk's wait) and the waits it puts in
    :func:`guard_wait`. Its steps then open no cancel scope of their own, the first one included
    (its ``RunStart`` handlers' waits are guarded): ``aclose()`` from another task cancels the
    guarded wait in progress, or the next one refuses to start (:mod:`lionagi._interrupt`).
    """
    if not _TURN_OPTIONS.issuperset(options):
        raise unexpected_keywords("stream_in_turn", options, _TURN_OPTIONS)
    interrupt = Interrupt() if guarded and not options.get("nests", True) else None
    return TurnStream(_StreamDriver(branch, model, invoke, options, interrupt))
