"""The one owner of a turn's lifecycle (ADR-0018 D2-D5), on anyio.

Every model-invoking operation of a :class:`~lionagi.session.branch.Branch` enters here, through
:func:`run_in_turn` (a coroutine) or :func:`stream_in_turn` (an async iterator). A top-level entry

1. waits for the Branch's turn lock (FIFO; cancelling the wait leaves no trace),
2. creates the :class:`TurnExecutionContext`, points the Branch at it and binds it task-locally,
3. runs the body inside an anyio task group that owns the turn's nested work and its
   message-signal tasks, emitting ``RunStart`` first,
4. finalizes inside a shielded cancel scope: phase "finalizing", cancel and await unfinished
   nested work, drain message signals, emit exactly one ``RunEnd``/``RunFailed``, publish the
   context report, phase "closed", clear the pointer, reset the binding, release the lock.

A call made while the same Branch's turn is live in the calling task's context (or from the task
iterating that Branch's stream) is *nested*: it shares the context and owns nothing.

A stream turn runs its body one step per item. Each step has its own task group, so no task group
or cancel scope is open across a ``yield`` (PEP 789): the iterator hands an item out only after
the step's nested work was joined and its message signals were delivered.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from uuid import UUID, uuid4

import anyio

from lionagi._compat import spawn_detached
from lionagi.errors import ConfigurationError, TurnFinalizingError
from lionagi.operations.types import TaskHandle, TurnExecutionContext, TurnScope
from lionagi.session.control import StopStream, check_control
from lionagi.session.signal import (
    MessageAdded,
    RunEnd,
    RunFailed,
    RunStart,
    build_run_end,
    current_op_id,
)

if TYPE_CHECKING:
    from lionagi.protocols.messages import Message
    from lionagi.service.imodel import iModel
    from lionagi.session.branch import Branch
    from lionagi.session.observer import Observer

__all__ = [
    "TurnFinalizingError",
    "control_point",
    "current_scope",
    "run_in_turn",
    "schedule_message_signal",
    "stream_in_turn",
]

logger = logging.getLogger("lionagi.turn")

T = TypeVar("T")
ModelRole = Literal["chat", "parse"]


@dataclass(frozen=True, slots=True)
class _ActiveTurnBinding:
    branch_id: UUID
    scope: TurnScope


_active_turn_var: ContextVar[_ActiveTurnBinding | None] = ContextVar(
    "lionagi_active_turn", default=None
)


# -- entry classification (ADR D2 state machine) -------------------------------------------
def _nested_scope(branch: Branch) -> TurnScope | None:
    """The nested scope to use for a call on ``branch``, None for a top-level entry.

    Raises TurnFinalizingError for a same-binding call while the turn is finalizing.
    """
    context = branch._active_turn_context
    if context is None:
        return None
    binding = _active_turn_var.get()
    if binding is not None and binding.branch_id == branch.id and binding.scope.context is context:
        if context.phase == "active":
            return TurnScope(context, owns_lifecycle=False)
        if context.phase == "finalizing":
            raise TurnFinalizingError(
                f"Branch {branch.id}: turn {context.turn_id} is finalizing; a call from the "
                "turn's own tasks (e.g. a terminal observer handler) cannot start a new turn "
                "until it has ended"
            )
        return None
    # A stream turn between steps: its consumer's task calling the Branch again is part of the
    # turn (waiting for the lock that turn holds would never end).
    if (
        context.task_group is None
        and context.phase == "active"
        and anyio.get_current_task().id == context.owner_task.id
    ):
        return TurnScope(context, owns_lifecycle=False)
    return None


def current_scope(branch: Branch) -> TurnScope | None:
    """The live turn scope of the calling task on ``branch``, if any (for operation bodies)."""
    try:
        return _nested_scope(branch)
    except TurnFinalizingError:
        return None


# -- message signals (ADR D3) ----------------------------------------------------------------
def schedule_message_signal(branch: Branch, message: Message) -> None:
    """Tell observers about ``message``: as a child of the live turn, or detached best-effort.

    In a live turn (the task-local binding and the Branch pointer agree and the turn's task group
    is open, including while its nested work shuts down) the delivery task joins the turn's task
    group, is shielded from cancellation,
    waits for the previous message signal of the turn (observers see messages in order) and is
    drained before the terminal signal. Without a live turn the delivery is detached and never
    adopted by a later turn. Nothing is scheduled without an interested observer or event loop.
    """
    observer = branch._observer
    if observer is None or not observer.wants(MessageAdded):
        return
    context = branch._active_turn_context
    binding = _active_turn_var.get()
    # A turn's task group is open while its body runs and while its nested work shuts down
    # (phase "finalizing"); a message recorded then is still part of the turn's history block,
    # so its signal is adopted and drained before the terminal, never delivered after it.
    live = (
        context is not None
        and context.phase != "closed"
        and context.task_group is not None
        and binding is not None
        and binding.branch_id == branch.id
        and binding.scope.context is context
    )
    if live:
        assert context is not None
        assert context.task_group is not None
        signal = MessageAdded(branch_id=branch.id, message=message, turn_id=context.turn_id)
        handle = TaskHandle("message-signal")
        previous = context.last_signal
        context.last_signal = handle
        context.signal_tasks.add(handle)
        context.task_group.start_soon(_deliver_in_turn, context, handle, previous, observer, signal)
        return
    signal = MessageAdded(branch_id=branch.id, message=message, turn_id=None)
    spawn_detached(observer.emit, signal)


async def _deliver_in_turn(
    context: TurnExecutionContext,
    handle: TaskHandle,
    previous: TaskHandle | None,
    observer: Observer,
    signal: MessageAdded,
) -> None:
    try:
        with anyio.CancelScope(shield=True):
            if previous is not None:
                await previous.done.wait()
            await observer.emit(signal)
    except Exception:  # emit contains handler errors; this guards the turn's task group
        logger.exception("message signal delivery failed in turn %s", context.turn_id)
    finally:
        context.signal_tasks.discard(handle)
        handle.done.set()


async def _drain_signals(context: TurnExecutionContext) -> None:
    while context.signal_tasks:
        for handle in tuple(context.signal_tasks):
            await handle.done.wait()


async def _cancel_nested(context: TurnExecutionContext) -> None:
    while context.nested_tasks:
        pending = tuple(context.nested_tasks)
        for handle in pending:
            handle.cancel_scope.cancel()
        for handle in pending:
            await handle.done.wait()
            context.nested_tasks.discard(handle)


async def control_point(scope: TurnScope) -> None:
    """A control boundary of a turn (before a model call, between rounds or events, before a
    tool batch): deliver the turn's pending message signals first, so a directive an observer
    issues on one of them is seen here, then apply the pending directive (:func:`check_control`).
    """
    if scope.context.signal_tasks:
        await _drain_signals(scope.context)
    check_control(scope)


# -- nested entries ---------------------------------------------------------------------------
async def _run_nested(branch: Branch, scope: TurnScope, body: Callable[[], Awaitable[T]]) -> T:
    """Run a nested call. From a task other than the owner it is registered as nested work, so
    finalization can cancel it; it then fails with TurnFinalizingError."""
    context = scope.context
    task_id = anyio.get_current_task().id
    if task_id == context.owner_task.id and context.task_group is None:
        return await _between_steps(branch, scope, body)
    if task_id == context.owner_task.id or any(h.task_id == task_id for h in context.nested_tasks):
        return await body()
    handle = TaskHandle("nested-call")
    handle.task_id = task_id
    context.nested_tasks.add(handle)
    try:
        with handle.cancel_scope:
            return await body()
        raise TurnFinalizingError(
            f"turn {context.turn_id} finalized while this nested call was running; work that "
            "joins a turn cannot outlive it"
        )
    finally:
        context.nested_tasks.discard(handle)
        handle.done.set()


async def _in_step_group(
    context: TurnExecutionContext,
    body: Callable[[], Awaitable[T]],
    *,
    owner: bool,
    final: bool,
) -> tuple[T | None, BaseException | None]:
    """Run ``body`` in a task group that owns the nested work and message signals it starts.

    On the way out, unfinished nested work is cancelled and awaited and message signals are
    drained, shielded from cancellation. The body's exception (or a cancellation delivered at the
    group's exit) is returned, not raised. For the owner, a final or failed body first moves the
    turn to "finalizing", which closes nested entry and control.
    """
    value: T | None = None
    error: BaseException | None = None
    try:
        async with anyio.create_task_group() as group:
            context.task_group = group
            try:
                value = await body()
            except BaseException as exc:  # handed back to the caller, re-raised after cleanup
                error = exc
            if owner and (final or error is not None):
                context.phase = "finalizing"
            if context.nested_tasks or context.signal_tasks:  # skip the scope when idle
                with anyio.CancelScope(shield=True):
                    await _cancel_nested(context)
                    await _drain_signals(context)
    except BaseException as exc:  # a cancellation delivered at the task group's exit
        if error is None:
            error = exc
    finally:
        context.task_group = None
    try:
        return value, error
    finally:
        error = None  # this frame is in the error's traceback: no cycle through its locals


async def _between_steps(branch: Branch, scope: TurnScope, body: Callable[[], Awaitable[T]]) -> T:
    """A call by a stream's consumer between two items: it joins the turn like any nested call,
    with a task group of its own for the work and signals it starts."""
    context = scope.context
    binding = _ActiveTurnBinding(branch.id, scope)
    token = _active_turn_var.set(binding)
    try:
        value, error = await _in_step_group(context, body, owner=False, final=False)
    finally:
        _active_turn_var.reset(token)
    if error is not None:
        try:
            raise error
        finally:
            error = None  # the traceback holds this frame: break the cycle through it
    return value  # type: ignore[return-value]  # set whenever error is None


# -- the top-level turn -----------------------------------------------------------------------
class _Turn:
    """One top-level turn between lock acquisition and release. Internal to this module."""

    __slots__ = ("_released", "binding", "branch", "context", "lock", "scope", "started")

    def __init__(self, branch: Branch, context: TurnExecutionContext, lock: Any) -> None:
        self.branch = branch
        self.context = context
        self.lock = lock
        self.scope = TurnScope(context, owns_lifecycle=True)
        self.binding = _ActiveTurnBinding(branch.id, self.scope)
        self.started = time.perf_counter()
        self._released = False

    @classmethod
    async def begin(
        cls,
        branch: Branch,
        model: iModel | None,
        role: ModelRole,
        operation: str | None,
    ) -> _Turn:
        lock = branch._turn_lock.get()
        await lock.acquire()  # cancelled while waiting: nothing was created, nothing to undo
        try:
            resolved = model
            if resolved is None:
                resolved = branch.parse_model if role == "parse" else branch.chat_model
            if resolved is None:
                raise ConfigurationError(
                    f"Branch {branch.name or branch.id} has no {role} model; pass "
                    f"{'parse_model' if role == 'parse' else 'chat_model'}=iModel(...) to the "
                    "Branch or a model to the call"
                )
            context = TurnExecutionContext(
                turn_id=uuid4(),
                model=resolved,
                owner_task=anyio.get_current_task(),
                operation=operation,
            )
            assert branch._active_turn_context is None, "turn lock held by two turns"
            branch._active_turn_context = context
        except BaseException:
            lock.release()
            raise
        return cls(branch, context, lock)

    async def step(
        self,
        body: Callable[[], Awaitable[T]],
        *,
        start: bool,
        final: bool,
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> tuple[T | None, BaseException | None, bool]:
        """Run one step of the turn: (value, error, finished).

        The step is final when ``final`` is set or the body raised; a final step awaits
        ``close`` (a stream's body generator) and then runs the terminal finalization before
        returning.
        """
        context = self.context
        token = _active_turn_var.set(self.binding)
        try:

            async def begin_and_run() -> T:
                if start:
                    await self._emit_start()
                return await body()

            value, error = await _in_step_group(context, begin_and_run, owner=True, final=final)
            if error is not None:
                final = True
            if final:
                context.phase = "finalizing"
                if close is None and self.branch._observer is None and not context.signal_tasks:
                    self._close()  # nothing to await: no shielded scope needed
                else:
                    with anyio.CancelScope(shield=True):
                        if close is not None:
                            await close()
                        # signals raised after the group closed (none in practice) are ours too
                        await _drain_signals(context)
                        await self._emit_terminal(error)
                        self._close()
        finally:
            _active_turn_var.reset(token)
        return value, error, final

    async def _emit_start(self) -> None:
        observer = self.branch._observer
        if observer is None or not observer.wants(RunStart):
            return
        signal = RunStart(
            branch_id=self.branch.id,
            turn_id=self.context.turn_id,
            operation=self.context.operation,
            op_id=current_op_id.get(),
        )
        # Shielded: once started, every observer sees RunStart before the turn's terminal.
        with anyio.CancelScope(shield=True):
            await observer.emit(signal)

    async def _emit_terminal(self, error: BaseException | None) -> None:
        observer = self.branch._observer
        if observer is None:
            return
        context = self.context
        ended = error is None or isinstance(error, StopAsyncIteration | StopStream | GeneratorExit)
        if not observer.wants(RunEnd if ended else RunFailed):
            return
        duration_ms = (time.perf_counter() - self.started) * 1000.0
        signal: RunEnd | RunFailed
        if ended:
            signal = build_run_end(
                self.branch,
                turn_id=context.turn_id,
                duration_ms=duration_ms,
                usage=context.usage,
                num_turns=context.model_calls,
                attempts=context.model_attempts,
                operation=context.operation,
                op_id=current_op_id.get(),
            )
        else:
            signal = RunFailed(
                branch_id=self.branch.id,
                turn_id=context.turn_id,
                operation=context.operation,
                op_id=current_op_id.get(),
                data=error,
                duration_ms=duration_ms,
            )
        try:
            await observer.emit(signal)
        except Exception:  # the terminal attempt is made once; its failure is diagnostic
            logger.exception("terminal signal of turn %s failed", context.turn_id)

    def _close(self) -> None:
        context = self.context
        branch = self.branch
        branch._last_context_report = context.provider_report
        context.phase = "closed"
        context.last_signal = None
        if branch._active_turn_context is context:
            branch._active_turn_context = None

    def release(self) -> None:
        """Release the lock (once). A turn released without finalization is closed first."""
        if self._released:
            return
        self._released = True
        if self.context.phase != "closed":
            self._close()
        self.lock.release()


# -- public drivers ---------------------------------------------------------------------------
async def run_in_turn(
    branch: Branch,
    *,
    model: iModel | None,
    invoke: Callable[[TurnScope], Awaitable[T]],
    role: ModelRole = "chat",
    operation: str | None = None,
) -> T:
    """Run ``invoke(scope)`` as a turn of ``branch`` and return its result unchanged.

    A top-level call waits for the Branch, emits ``RunStart`` and exactly one terminal signal;
    a nested call (from inside a live turn of this Branch) runs at once in the same scope.
    ``model`` overrides the Branch's ``role`` model for this turn only.
    """
    nested = _nested_scope(branch)
    if nested is not None:
        return await _run_nested(branch, nested, lambda: invoke(nested))
    turn = await _Turn.begin(branch, model, role, operation)
    try:
        value, error, _ = await turn.step(lambda: invoke(turn.scope), start=True, final=True)
    finally:
        turn.release()
    if error is not None:
        try:
            raise error
        finally:
            error = None  # the traceback holds this frame: break the cycle through it
    return value  # type: ignore[return-value]  # set whenever error is None


class _TurnStream:
    """Drives a stream turn step by step; used only by :func:`stream_in_turn`."""

    __slots__ = ("_done", "_items", "_turn", "branch", "invoke", "model", "operation", "role")

    def __init__(
        self,
        branch: Branch,
        model: iModel | None,
        invoke: Callable[[TurnScope], AsyncIterator[T]],
        role: ModelRole,
        operation: str | None,
    ) -> None:
        self.branch = branch
        self.model = model
        self.invoke = invoke
        self.role = role
        self.operation = operation
        self._turn: _Turn | None = None
        self._items: AsyncIterator[Any] | None = None
        self._done = False

    async def next(self) -> Any:
        if self._done:
            raise StopAsyncIteration
        turn = self._turn
        start = turn is None
        if turn is None:
            nested = _nested_scope(self.branch)
            if nested is not None:
                return await self._next_nested(nested)
            turn = self._turn = await _Turn.begin(
                self.branch, self.model, self.role, self.operation
            )
        try:
            value, error, final = await turn.step(
                self._advance, start=start, final=False, close=self._close_items
            )
        except BaseException:
            self._done = True
            turn.release()
            raise
        if final:
            self._done = True
            turn.release()
            if error is None or isinstance(error, StopAsyncIteration | StopStream):
                raise StopAsyncIteration
            raise error
        return value

    async def _advance(self) -> Any:
        if self._items is None:
            assert self._turn is not None
            self._items = aiter(self.invoke(self._turn.scope))
        return await anext(self._items)

    async def _next_nested(self, scope: TurnScope) -> Any:
        if self._items is None:
            self._items = aiter(self.invoke(scope))
        items = self._items
        try:
            return await _run_nested(self.branch, scope, lambda: anext(items))
        except BaseException:
            self._done = True
            raise

    async def aclose(self) -> None:
        """Close the stream: the body's generator is closed, then the turn ends with RunEnd."""
        if self._done:
            return
        self._done = True
        turn = self._turn
        if turn is None:  # never started, or nested: nothing of ours to finalize
            await _close_items(self._items)
            return
        try:
            _, error, _ = await turn.step(
                self._close_items, start=False, final=True, close=self._close_items
            )
        finally:
            turn.release()
        if error is not None:
            raise error

    async def _close_items(self) -> None:
        await _close_items(self._items)


async def _close_items(items: AsyncIterator[Any] | None) -> None:
    close = getattr(items, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception:  # ADR D4: an ordinary exception from close is logged and suppressed
        logger.exception("closing a stream body failed")


async def stream_in_turn(
    branch: Branch,
    *,
    model: iModel | None,
    invoke: Callable[[TurnScope], AsyncIterator[T]],
    role: ModelRole = "chat",
    operation: str | None = None,
) -> AsyncGenerator[T, None]:
    """Iterate ``invoke(scope)`` as one turn of ``branch``, holding the turn until the end.

    Creating the iterator does nothing; the turn starts at the first ``__anext__``. Exhaustion,
    ``StopStream`` and ``aclose()`` end it with ``RunEnd``; an exception or cancellation with
    ``RunFailed`` (re-raised). The body's own generator is closed before the terminal signal.
    """
    driver = _TurnStream(branch, model, invoke, role, operation)
    try:
        while True:
            try:
                item = await driver.next()
            except StopAsyncIteration:
                return
            yield item
    finally:
        await driver.aclose()
