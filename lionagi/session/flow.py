"""Running an operation graph: :meth:`Session.flow` and :meth:`Session.flow_stream`.

A flow is one anyio task group. Each node runs in a task of that group as one top-level turn
on its branch (ADR-0018), so it has its own ``turn_id``, and the turn's lifecycle signals carry
the node's ``op_id``. A node's task exists only while the node is ready to run: nodes become
ready when every dependency has ended, and a dispatcher starts them, at most
``max_concurrent`` at a time (an :class:`anyio.CapacityLimiter`). Nothing a flow starts
outlives the call: a failure or a cancellation has one owner, the flow's task group.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID, uuid4

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup
from pydantic_core import to_jsonable_python

from lionagi import _instrument
from lionagi.errors import ConfigurationError, FlowError
from lionagi.operations.graph import Edge, OperationGraph, OperationNode
from lionagi.operations.turn import run_in_turn
from lionagi.service.imodel import iModel
from lionagi.session.signal import (
    FlowEnd,
    FlowStart,
    NodeEnd,
    NodeFailed,
    NodeSkipped,
    NodeStart,
    Signal,
    current_op_id,
)

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from lionagi.operations.builder import OperationGraphBuilder
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch
    from lionagi.session.session import Session

__all__ = ["FlowEvent", "FlowStream", "run_flow"]

logger = logging.getLogger("lionagi.flow")

NodeStatus = Literal["completed", "failed", "skipped", "cancelled"]
ProgressCallback = Callable[[str, str, str, float], Awaitable[None] | None]


@dataclass(slots=True)
class FlowEvent:
    """One node's outcome, as :meth:`Session.flow_stream` yields it."""

    operation_id: str
    name: str
    status: NodeStatus
    result: Any = None
    branch_id: UUID | None = None
    turn_id: UUID | None = None
    error: BaseException | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"


@dataclass(slots=True, eq=False)
class _NodeState:
    node: OperationNode
    remaining: int
    status: Literal["pending", "running"] | NodeStatus = "pending"
    result: Any = None
    error: BaseException | None = None
    reason: str | None = None
    blocked: bool = False  # skipped because a dependency failed (propagates to dependents)
    branch: Branch | None = None
    turn_id: UUID | None = None
    started: float = 0.0
    # on a shared branch: the previous node's "holds the branch" event, and this node's
    after: anyio.Event | None = None
    holds: anyio.Event | None = None
    _jsonable: Any = field(default=None)
    _has_jsonable: bool = False

    def jsonable(self) -> Any:
        if not self._has_jsonable:
            self._jsonable = _to_json(self.result)
            self._has_jsonable = True
        return self._jsonable


def _to_json(value: Any) -> Any:
    return to_jsonable_python(value, fallback=str)


def _graph_of(graph: OperationGraph | OperationGraphBuilder) -> OperationGraph:
    """The graph itself, or a builder's graph."""
    if isinstance(graph, OperationGraph):
        return graph
    get_graph = getattr(graph, "get_graph", None)
    if get_graph is None:
        raise FlowError(
            f"flow() takes an OperationGraph (builder.get_graph()), got {type(graph).__name__}"
        )
    built = get_graph()
    assert isinstance(built, OperationGraph)
    return built


def _check_options(context: Mapping[str, Any] | None, max_concurrent: int | None) -> None:
    if max_concurrent is not None and (
        isinstance(max_concurrent, bool)
        or not isinstance(max_concurrent, int)
        or max_concurrent < 1
    ):
        raise ConfigurationError(
            f"max_concurrent must be a positive int or None (no limit), got {max_concurrent!r}"
        )
    if context is not None and not isinstance(context, Mapping):
        raise ConfigurationError(
            f"context must be a mapping (it seeds every node's context), got "
            f"{type(context).__name__}"
        )


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class _Flow:
    """One run of a graph. Internal: :func:`run_flow` and :class:`FlowStream` drive it."""

    def __init__(
        self,
        session: Session,
        graph: OperationGraph | OperationGraphBuilder,
        *,
        context: Mapping[str, Any] | None,
        parallel: bool,
        max_concurrent: int | None,
        default_branch: Branch | UUID | str | None,
        on_progress: ProgressCallback | None,
        fail_fast: bool,
        on_event: Callable[[FlowEvent], None] | None = None,
    ) -> None:
        graph = _graph_of(graph)
        _check_options(context, max_concurrent)
        self.session = session
        self.graph = graph
        self.order = graph.topological_order()  # raises GraphCycleError
        self.seed: dict[str, Any] = dict(context or {})
        self.sequential = not parallel
        self.max_concurrent = max_concurrent
        self.on_progress = on_progress
        self.fail_fast = fail_fast
        self.on_event = on_event
        self.flow_id = uuid4()
        self.default = session._resolve_default(default_branch)
        self.pinned = {
            node.id: session._resolve_pinned(node.branch, node.label)
            for node in graph
            if node.branch is not None
        }
        self.states = {
            node_id: _NodeState(graph.nodes[node_id], len(graph.incoming(node_id)))
            for node_id in self.order
        }
        self.observer = session.observer
        self.completed: list[UUID] = []
        self.failure: BaseException | None = None
        self._group: TaskGroup | None = None
        self._ready: deque[UUID] = deque()
        self._wake = anyio.Event()
        self._tails: dict[UUID, anyio.Event] = {}  # per shared branch: the last node's event

    # -- the run -------------------------------------------------------------------------
    async def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        # traced: the flow's span is current from here on, so every node's turn nests under it
        traced = None if _instrument.tracer is None else _instrument.flow(self)
        status: Literal["completed", "failed", "cancelled"] = "completed"
        error: BaseException | None = None
        try:
            await self._emit(FlowStart(flow_id=self.flow_id, node_count=len(self.order)))
            if self.sequential:
                for node_id in self.order:
                    await self._execute(node_id)
                    if self.failure is not None:
                        break
            else:
                await self._dispatch()
            if self.failure is not None:
                status = "failed"
                raise self.failure
        except anyio.get_cancelled_exc_class() as exc:
            status, error = "cancelled", exc
            raise
        except BaseException as exc:
            status, error = "failed", exc
            raise
        finally:
            await self._end(status, error, started, traced)
            error = None  # no exception -> traceback -> this frame -> exception cycle
        return self._result()

    async def _end(
        self,
        status: Literal["completed", "failed", "cancelled"],
        error: BaseException | None,
        started: float,
        traced: _instrument.FlowTrace | None,
    ) -> None:
        """Deliver FlowEnd (shielded) and end the flow's span."""
        counts = {s: 0 for s in ("completed", "failed", "skipped", "cancelled")}
        for state in self.states.values():
            if state.status in counts:
                counts[state.status] += 1
        end = FlowEnd(
            flow_id=self.flow_id,
            status=status,
            duration_ms=(time.perf_counter() - started) * 1000.0,
            **counts,
        )
        try:
            with anyio.CancelScope(shield=True):
                await self._emit(end)
        finally:
            if traced is not None:
                traced.done(status, error, counts)

    async def _dispatch(self) -> None:
        limit = math.inf if self.max_concurrent is None else self.max_concurrent
        limiter = anyio.CapacityLimiter(limit)
        self._ready.extend(node_id for node_id, s in self.states.items() if s.remaining == 0)
        undispatched = len(self.order)
        async with anyio.create_task_group() as group:
            self._group = group
            while undispatched:
                while not self._ready:
                    await self._wake.wait()
                    self._wake = anyio.Event()
                node_id = self._ready.popleft()
                try:  # a free slot needs no trip through the scheduler
                    limiter.acquire_on_behalf_of_nowait(node_id)
                except anyio.WouldBlock:
                    await limiter.acquire_on_behalf_of(node_id)
                undispatched -= 1
                self._queue(self.states[node_id])
                group.start_soon(self._node_task, node_id, limiter)
        self._group = None

    def _queue(self, state: _NodeState) -> None:
        """Nodes on one shared branch reach its turn lock in dispatch order, whatever order
        the scheduler runs their tasks in: each waits until the one before holds the branch."""
        node = state.node
        branch = self.pinned.get(node.id)
        if branch is None and node.inherit_context and node.primary_dependency is not None:
            branch = self.states[node.primary_dependency].branch
        if branch is None:
            return  # a fork of its own
        state.after = self._tails.get(branch.id)
        state.holds = self._tails[branch.id] = anyio.Event()

    async def _node_task(self, node_id: UUID, limiter: anyio.CapacityLimiter) -> None:
        try:
            await self._execute(node_id)
        finally:
            limiter.release_on_behalf_of(node_id)

    def _finished(self, node_id: UUID) -> None:
        if self.sequential:
            return
        woke = False
        for succ in self.graph.successors(node_id):
            state = self.states[succ]
            state.remaining -= 1
            if state.remaining == 0:
                self._ready.append(succ)
                woke = True
        if woke:
            self._wake.set()

    # -- one node ------------------------------------------------------------------------
    async def _execute(self, node_id: UUID) -> None:
        state = self.states[node_id]
        token = current_op_id.set(str(node_id))
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled flow starts nothing
            try:
                reason = await self._skip_reason(state)
                if reason is None:
                    state.branch = self._branch_for(state)
            except Exception as exc:  # a condition raised, or no branch could be made
                await self._failed(state, exc)
                return
            if reason is not None:
                await self._skipped(state, reason)
                return
            await self._run(state)
        finally:
            current_op_id.reset(token)
            if state.holds is not None:
                state.holds.set()
            self._finished(node_id)

    async def _run(self, state: _NodeState) -> None:
        node = state.node
        branch = state.branch
        assert branch is not None
        state.status = "running"
        state.started = time.perf_counter()
        delivered = await self._report(
            NodeStart,
            lambda: NodeStart(
                flow_id=self.flow_id, op_id=str(node.id), name=node.name, branch_id=branch.id
            ),
            state,
            "started",
        )
        if delivered:
            try:
                # cancelled while NodeStart was being delivered: the node ends before its turn
                await anyio.lowlevel.checkpoint_if_cancelled()
            except anyio.get_cancelled_exc_class() as exc:
                await self._cancelled(state, exc)
                raise
        params = self._parameters(state)
        explicit = params.get(node.model_parameter() or "")
        model = explicit if isinstance(explicit, iModel) else None

        async def invoke(scope: TurnScope) -> Any:
            state.turn_id = scope.context.turn_id
            if state.holds is not None:
                state.holds.set()  # the next node on this branch may queue for it now
            return await _call(node, branch, params)

        try:
            if state.after is not None:
                await state.after.wait()
            result = await run_in_turn(
                branch,
                model=model,
                invoke=invoke,
                role="parse" if node.operation == "parse" else "chat",
                operation=node.operation_name,
            )
        except anyio.get_cancelled_exc_class() as exc:
            await self._cancelled(state, exc)
            raise
        except Exception as exc:
            await self._failed(state, exc)
            return
        state.status = "completed"
        state.result = result
        self.completed.append(node.id)
        await self._report(
            NodeEnd,
            lambda: NodeEnd(
                flow_id=self.flow_id,
                op_id=str(node.id),
                name=node.name,
                branch_id=branch.id,
                turn_id=state.turn_id,
                duration_ms=self._elapsed(state) * 1000.0,
            ),
            state,
            "completed",
        )
        self._event(state)

    async def _failed(self, state: _NodeState, exc: Exception) -> None:
        state.status = "failed"
        state.error = exc
        if self.fail_fast and self.failure is None:
            self.failure = exc
            if self._group is not None:
                self._group.cancel_scope.cancel()
        await self._report(NodeFailed, lambda: self._node_failed(state, exc), state, "failed")
        self._event(state)

    async def _cancelled(self, state: _NodeState, exc: BaseException) -> None:
        state.status = "cancelled"
        state.error = exc
        await self._report(NodeFailed, lambda: self._node_failed(state, exc), state, "cancelled")
        self._event(state)

    async def _skipped(self, state: _NodeState, reason: str) -> None:
        state.status = "skipped"
        state.reason = reason
        await self._report(
            NodeSkipped,
            lambda: NodeSkipped(
                flow_id=self.flow_id, op_id=str(state.node.id), name=state.node.name, reason=reason
            ),
            state,
            "skipped",
        )
        self._event(state)

    async def _report(
        self,
        kind: type[Signal],
        build: Callable[[], Signal],
        state: _NodeState,
        status: str,
    ) -> bool:
        """Deliver a node signal and the progress callback, shielded (a node's signals are
        never lost to a cancellation). Returns whether anything was delivered."""
        wanted = self.observer.wants(kind)
        if not wanted and self.on_progress is None:
            return False
        with anyio.CancelScope(shield=True):
            if wanted:
                await self.observer.emit(build())
            await self._progress(state, status)
        return True

    def _node_failed(self, state: _NodeState, exc: BaseException) -> NodeFailed:
        return NodeFailed(
            flow_id=self.flow_id,
            op_id=str(state.node.id),
            name=state.node.name,
            branch_id=None if state.branch is None else state.branch.id,
            turn_id=state.turn_id,
            data=exc,
            duration_ms=self._elapsed(state) * 1000.0,
        )

    async def _skip_reason(self, state: _NodeState) -> str | None:
        """Why the node must not run, or None. A failed (or failure-skipped) dependency skips
        it; otherwise it runs when it has no dependencies or at least one dependency completed
        with its edge condition (if any) holding."""
        edges = self.graph.incoming(state.node.id)
        if not edges:
            return None
        blocked = self._blocked_by(edges)
        if blocked is not None:
            state.blocked = True
            return blocked
        reasons: list[str] = []
        for edge in edges:
            dep = self.states[edge.head]
            if dep.status != "completed":
                reasons.append(f"dependency {dep.node.label} was skipped")
                continue
            if edge.condition is None:
                return None
            verdict = edge.condition(dep.result)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if verdict:
                return None
            reasons.append(f"the condition on {dep.node.label}'s result did not hold")
        return "; ".join(reasons)

    def _blocked_by(self, edges: list[Edge]) -> str | None:
        """Why a failed (or failure-skipped) dependency blocks the node, or None."""
        for edge in edges:
            dep = self.states[edge.head]
            if dep.status == "failed":
                assert dep.error is not None
                return f"dependency {dep.node.label} failed: {_describe(dep.error)}"
            if dep.status == "skipped" and dep.blocked:
                return f"dependency {dep.node.label} was skipped: {dep.reason}"
        return None

    def _branch_for(self, state: _NodeState) -> Branch:
        node = state.node
        pinned = self.pinned.get(node.id)
        if pinned is not None:
            return pinned
        if node.inherit_context and node.primary_dependency is not None:
            primary = self.states[node.primary_dependency]
            if primary.status == "completed" and primary.branch is not None:
                return primary.branch
        return self.session._fork_for_flow(self.default, node.name)

    def _parameters(self, state: _NodeState) -> dict[str, Any]:
        node = state.node
        params = dict(node.parameters)
        if not node.accepts_context():
            return params
        context: dict[str, Any] = dict(self.seed)
        for edge in self.graph.incoming(node.id):
            dep = self.states[edge.head]
            if dep.status == "completed":
                context[f"{dep.node.name or dep.node.id}_result"] = dep.jsonable()
        own = params.get("context")
        if isinstance(own, Mapping):
            context.update(own)
        elif own is not None:
            context["original_context"] = own
        if context:
            params["context"] = context
        return params

    # -- reporting -----------------------------------------------------------------------
    def _elapsed(self, state: _NodeState) -> float:
        return 0.0 if not state.started else time.perf_counter() - state.started

    async def _emit(self, signal: Signal) -> None:
        if self.observer.wants(type(signal)):
            await self.observer.emit(signal)

    async def _progress(self, state: _NodeState, status: str) -> None:
        if self.on_progress is None:
            return
        branch = state.branch
        label = (state.node.name or "") if branch is None else (branch.name or str(branch.id))
        try:
            outcome = self.on_progress(str(state.node.id), label, status, self._elapsed(state))
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # progress reporting never changes the flow
            logger.exception("on_progress failed for node %s", state.node.label)

    def _event(self, state: _NodeState) -> None:
        if self.on_event is None:
            return
        status = state.status
        assert status in ("completed", "failed", "skipped", "cancelled")
        self.on_event(
            FlowEvent(
                operation_id=str(state.node.id),
                name=state.node.name or state.node.operation_name,
                status=status,
                result=state.result if status == "completed" else None,
                branch_id=None if state.branch is None else state.branch.id,
                turn_id=state.turn_id,
                error=state.error,
                reason=state.reason,
            )
        )

    def _result(self) -> dict[str, Any]:
        results: dict[UUID, Any] = {}
        failed: dict[UUID, BaseException] = {}
        skipped: list[UUID] = []
        reasons: dict[UUID, str] = {}
        final = dict(self.seed)
        for node_id in self.order:
            state = self.states[node_id]
            if state.status == "completed":
                results[node_id] = state.result
                final[f"{state.node.name or node_id}_result"] = state.result
                returned = state.result.get("context") if isinstance(state.result, dict) else None
                if isinstance(returned, Mapping):
                    final.update(returned)
            elif state.status == "failed":
                assert state.error is not None
                failed[node_id] = state.error
                results[node_id] = {"error": _describe(state.error)}
            elif state.status == "skipped":
                skipped.append(node_id)
                reasons[node_id] = state.reason or ""
        return {
            "completed_operations": list(self.completed),
            "operation_results": results,
            "final_context": final,
            "skipped_operations": skipped,
            "failed_operations": failed,
            "skip_reasons": reasons,
        }


async def _call(node: OperationNode, branch: Branch, params: dict[str, Any]) -> Any:
    """Call the node's operation on ``branch``; a stream operation's items are collected."""
    if isinstance(node.operation, str):
        outcome = getattr(branch, node.operation)(**params)
    else:
        outcome = node.operation(branch, **params)
    if inspect.isawaitable(outcome):
        return await outcome
    if hasattr(outcome, "__aiter__"):
        try:
            items = [item async for item in outcome]
        finally:
            close = getattr(outcome, "aclose", None)
            if close is not None:
                await close()
        return items
    return outcome


async def run_flow(session: Session, graph: Any, **options: Any) -> dict[str, Any]:
    """Run ``graph`` on ``session`` (see :meth:`Session.flow`)."""
    return await _Flow(session, graph, **options).run()


class FlowStream:
    """The events of one flow, one per node as it ends: ``async with`` it, then iterate.

    Entering starts the flow in a task group owned by the ``async with`` block (never open
    across a ``yield``). Leaving the block before the flow ends cancels the flow, exactly like
    cancelling :meth:`Session.flow`. A ``fail_fast`` failure is raised by the iteration after
    the events that preceded it.
    """

    def __init__(self, session: Session, graph: Any, options: dict[str, Any]) -> None:
        self._session = session
        self._graph = graph
        self._options = options
        self._group: TaskGroup | None = None
        self._receive: MemoryObjectReceiveStream[FlowEvent] | None = None
        self._error: BaseException | None = None
        self._entered = False
        self.result: dict[str, Any] | None = None

    async def __aenter__(self) -> FlowStream:
        if self._entered:
            raise FlowError("a FlowStream can be entered once; call session.flow_stream() again")
        self._entered = True
        send, receive = anyio.create_memory_object_stream[FlowEvent](math.inf)
        flow = _Flow(self._session, self._graph, on_event=send.send_nowait, **self._options)
        self._receive = receive
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        group.start_soon(self._produce, flow, send)
        return self

    async def _produce(self, flow: _Flow, send: MemoryObjectSendStream[FlowEvent]) -> None:
        with send:
            try:
                self.result = await flow.run()
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as exc:  # handed to the consumer, after the events before it
                self._error = exc

    async def __aexit__(self, *exc_info: object) -> None:
        group = self._group
        assert group is not None
        assert self._receive is not None
        self._group = None
        group.cancel_scope.cancel()  # the flow ends with the block
        try:
            # The block's own exception stays the caller's: the group only joins the flow.
            await group.__aexit__(None, None, None)
        finally:
            self._receive.close()

    def __aiter__(self) -> FlowStream:
        return self

    async def __anext__(self) -> FlowEvent:
        if self._receive is None:
            raise FlowError(
                "iterate a flow stream inside its context: "
                "`async with session.flow_stream(graph) as events: async for event in events: ...`"
            )
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            pass
        error, self._error = self._error, None
        if error is not None:
            raise error
        raise StopAsyncIteration
