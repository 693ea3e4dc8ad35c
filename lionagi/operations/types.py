"""Runtime state of one top-level turn (ADR-0018 D1) and the scope operation bodies receive.

A :class:`TurnExecutionContext` is created when a top-level turn acquires its Branch and is
dropped after finalization. It is never serialized. A :class:`TurnScope` is what operation
bodies get: the shared context plus whether this entry owns the lifecycle.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

import anyio
from anyio import TaskInfo

from lionagi.protocols.messages import Usage

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from lionagi.protocols.context_providers import ProviderReport
    from lionagi.service.imodel import iModel
    from lionagi.session.control import LoopControl

__all__ = ["TaskHandle", "TurnExecutionContext", "TurnPhase", "TurnScope"]

logger = logging.getLogger("lionagi.turn")

TurnPhase = Literal["active", "finalizing", "closed"]
_UNSET: Any = object()


class TaskHandle:
    """A task that belongs to a turn: a cancel scope the turn can cancel and a done event it can
    await. Nested work started with :meth:`TurnScope.start_soon` returns one; ``await
    handle.wait()`` gives its result or raises its exception."""

    __slots__ = ("_error", "_result", "cancel_scope", "done", "name", "task_id")

    def __init__(self, name: str | None = None) -> None:
        self.cancel_scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.task_id: int | None = None
        self.name = name
        self._result: Any = _UNSET
        self._error: BaseException | None = None

    async def wait(self) -> Any:
        """Wait for the task; return its result or re-raise its failure."""
        await self.done.wait()
        if self._error is not None:
            raise self._error
        if self._result is _UNSET:
            raise anyio.get_cancelled_exc_class()()
        return self._result

    @property
    def finished(self) -> bool:
        return self.done.is_set()


@dataclass(slots=True, eq=False)
class TurnExecutionContext:
    """Mutable runtime state of one top-level turn (ADR-0018 D1)."""

    turn_id: UUID
    model: iModel | None
    owner_task: TaskInfo
    phase: TurnPhase = "active"
    provider_blocks: tuple[str, ...] = ()
    provider_report: ProviderReport | None = None
    control: LoopControl | None = None
    signal_tasks: set[TaskHandle] = field(default_factory=set)
    nested_tasks: set[TaskHandle] = field(default_factory=set)
    #: usage reported by this turn's model calls, and how many calls there were
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    #: requests those calls sent, retried attempts included
    model_attempts: int = 0
    operation: str | None = None
    # the task group of the running step; None between the steps of a stream turn
    task_group: TaskGroup | None = field(default=None, repr=False)
    # the newest in-turn message signal: the next one waits for it, keeping observer order
    last_signal: TaskHandle | None = field(default=None, repr=False)

    def record_usage(self, usage: Usage | None, attempts: int = 1) -> None:
        """Add one model call's usage (and the requests it took) to the turn's totals."""
        self.model_calls += 1
        self.model_attempts += attempts
        if usage is not None:
            self.usage = self.usage + usage


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
        """Start ``fn(*args)`` as nested work of this turn, in the turn's task group.

        The task shares the turn (calls on the same Branch from it are nested, not queued). If it
        is still running when the owning step ends, it is cancelled and awaited before the turn's
        terminal signal. A failure nobody awaited through the handle is logged.
        """
        from lionagi.operations.turn import TurnFinalizingError

        context = self.context
        group = context.task_group
        if context.phase != "active" or group is None:
            raise TurnFinalizingError(
                f"turn {context.turn_id} is {context.phase}; nested work can only start while "
                "the turn is active"
            )
        handle = TaskHandle(name)
        context.nested_tasks.add(handle)
        group.start_soon(_run_nested_task, context, handle, fn, args, name=name)
        return handle


async def _run_nested_task(
    context: TurnExecutionContext,
    handle: TaskHandle,
    fn: Callable[..., Awaitable[Any]],
    args: tuple[Any, ...],
) -> None:
    handle.task_id = anyio.get_current_task().id
    try:
        with handle.cancel_scope:
            handle._result = await fn(*args)
    except Exception as exc:
        handle._error = exc
        logger.debug("nested task %r of turn %s failed", handle.name, context.turn_id, exc_info=exc)
    finally:
        context.nested_tasks.discard(handle)
        handle.done.set()
