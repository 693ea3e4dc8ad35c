"""A Session owns branches and the one observer bus they report to."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, overload
from uuid import UUID

import anyio.lowlevel

from lionagi._declared import same_parameters
from lionagi.errors import BranchNotFoundError, ConfigurationError, FlowError
from lionagi.session.observer import Authorizer, Handler, Observer
from lionagi.session.signal import Signal

if TYPE_CHECKING:
    from lionagi.operations.graph import OperationGraph
    from lionagi.protocols.messages import Message
    from lionagi.session.branch import Branch
    from lionagi.session.flow import FlowStream, ProgressCallback

__all__ = ["Session"]

H = TypeVar("H", bound=Handler)
BranchRef = Any  # a Branch, its id (UUID or str) or its name

_MISSING: Any = object()
#: flow() arguments that are not options of the flow itself (verbose: upstream compatibility)
_NOT_FLOW_OPTIONS = frozenset({"self", "graph", "verbose"})


def _flow_options(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The options a flow runs with, from :meth:`Session.flow`'s arguments."""
    return {k: v for k, v in arguments.items() if k not in _NOT_FLOW_OPTIONS}


class Session:
    """Branches plus an observer bus, and the flows that run over them.

    ``session.observe(RunEnd, handler)`` subscribes ``handler(signal, session)`` (sync or async)
    to every ``RunEnd`` of every branch of this session; ``@session.observe(RunEnd)`` does the
    same as a decorator. ``authorize`` (sync or async, ``(branch, action_request) -> bool``)
    gates every tool call of its branches.

    The *default branch* is the first branch added (or ``default_branch=``), changed with
    :meth:`change_default_branch`; a session without branches creates an empty one when it is
    first asked for. :meth:`flow` runs an operation graph over forks of it.
    """

    def __init__(
        self,
        *,
        authorize: Authorizer | None = None,
        default_branch: Branch | None = None,
        name: str = "Session",
    ) -> None:
        self.name = name
        self.observer = Observer(self)
        self.observer.set_authorizer(authorize)
        self._branches: dict[UUID, Branch] = {}
        self._default: Branch | None = None
        if default_branch is not None:
            self.include_branches(default_branch)

    # -- branches --------------------------------------------------------------------------
    def new_branch(
        self, system: Any = None, *, as_default_branch: bool = False, **kwargs: Any
    ) -> Branch:
        """Create a Branch (``Branch(system=system, **kwargs)``: the same keywords) that reports
        to this session.

        ``as_default_branch=True`` makes it the session's default branch.
        """
        from lionagi.session.branch import Branch

        branch = Branch(system=system, **kwargs)
        self.include_branches(branch)
        if as_default_branch:
            self._default = branch
        return branch

    def include_branches(self, branches: Branch | Iterable[Branch]) -> None:
        """Attach existing branches. A branch belongs to at most one session."""
        from lionagi.session.branch import Branch

        items = [branches] if isinstance(branches, Branch) else list(branches)
        for branch in items:
            if not isinstance(branch, Branch):
                raise ConfigurationError(f"expected a Branch, got {type(branch).__name__}")
            if branch._session is not None and branch._session is not self:
                raise ConfigurationError(
                    f"Branch {branch.id} already belongs to another Session; use branch.clone() "
                    "to add a copy"
                )
        for branch in items:
            branch._session = self
            branch._observer = self.observer
            self._branches[branch.id] = branch
            if self._default is None:
                self._default = branch

    def remove_branch(self, branch: BranchRef, delete: bool = False) -> None:
        """Detach a branch (a Branch, its id or its name) from this session.

        If it was the default branch, the first remaining branch becomes the default.
        ``delete`` is accepted for upstream compatibility: the session keeps no other
        reference, so a detached branch is freed once the caller drops it.
        """
        removed = self.get_branch(branch)
        del self._branches[removed.id]
        removed._session = None
        removed._observer = None
        if self._default is removed:
            self._default = next(iter(self._branches.values()), None)

    @property
    def branches(self) -> tuple[Branch, ...]:
        return tuple(self._branches.values())

    @property
    def default_branch(self) -> Branch:
        """The branch flows fork by default (created empty on first use if there is none)."""
        if self._default is None:
            self.new_branch()
        assert self._default is not None
        return self._default

    def change_default_branch(self, branch: BranchRef) -> None:
        """Make ``branch`` (a Branch of this session, its id or its name) the default."""
        self._default = self.get_branch(branch)

    @overload
    def get_branch(self, branch: BranchRef) -> Branch: ...

    @overload
    def get_branch(self, branch: BranchRef, default: Any) -> Branch | Any: ...

    def get_branch(self, branch: BranchRef, default: Any = _MISSING) -> Branch | Any:
        """The branch ``branch`` names: a Branch of this session, its id (UUID or string) or
        its name (the first branch with that name). Without a ``default``, a missing branch
        raises :class:`BranchNotFoundError`."""
        from lionagi.session.branch import Branch

        found = self._find_branch(branch)
        if found is not None:
            return found
        if default is not _MISSING:
            return default
        shown = branch.id if isinstance(branch, Branch) else branch
        raise BranchNotFoundError(
            f"no branch {shown!r} in this session; branches are found by Branch, id or name "
            "(session.new_branch(...) or session.include_branches(branch) adds one)"
        )

    def _find_branch(self, branch: BranchRef) -> Branch | None:
        from lionagi.session.branch import Branch

        if isinstance(branch, Branch):
            found = self._branches.get(branch.id)
            return found if found is branch else None
        if isinstance(branch, UUID):
            return self._branches.get(branch)
        if not isinstance(branch, str):
            return None
        try:
            found = self._branches.get(UUID(branch))
        except ValueError:
            found = None
        if found is None:
            found = next((b for b in self._branches.values() if b.name == branch), None)
        return found

    def split(self, branch: BranchRef) -> Branch:
        """A clone of ``branch`` (new id, same history, copied tools and models), added to
        this session."""
        clone = self.get_branch(branch).clone()
        self.include_branches(clone)
        return clone

    async def asplit(self, branch: BranchRef) -> Branch:
        """:meth:`split`, as a coroutine (a checkpoint; cancellation before it splits nothing)."""
        await anyio.lowlevel.checkpoint()
        return self.split(branch)

    def concat_messages(self, branches: Iterable[BranchRef] | None = None) -> list[Message]:
        """The messages of ``branches`` (default: all), branch by branch, each message once
        (forks share their common history)."""
        chosen = self.branches if branches is None else [self.get_branch(b) for b in branches]
        seen: set[UUID] = set()
        out: list[Message] = []
        for branch in chosen:
            for message in branch.msgs:
                if message.id not in seen:
                    seen.add(message.id)
                    out.append(message)
        return out

    def to_df(self) -> Any:
        """Every branch's history as one pandas DataFrame (as :meth:`Branch.to_df`, branches in
        the order they joined). Needs the ``lionagi[pandas]`` extra."""
        from lionagi.session._frames import messages_frame

        return messages_frame(self._branches.values())

    def __iter__(self) -> Iterator[Branch]:
        return iter(self._branches.values())

    def __len__(self) -> int:
        return len(self._branches)

    def __contains__(self, branch: object) -> bool:
        return self.get_branch(branch, None) is not None

    # -- observing -------------------------------------------------------------------------
    @overload
    def observe(self, signal_type: type[Signal], handler: None = None) -> Callable[[H], H]: ...

    @overload
    def observe(self, signal_type: type[Signal], handler: Handler) -> Callable[[], None]: ...

    def observe(self, signal_type: type[Signal], handler: Handler | None = None) -> Any:
        """Subscribe ``handler(signal, session)``; returns a function that unsubscribes it.

        Without ``handler`` it is a decorator: ``@session.observe(RunEnd)`` subscribes the
        function and returns it unchanged.
        """
        if handler is not None:
            return self.observer.subscribe(signal_type, handler)
        if not (isinstance(signal_type, type) and issubclass(signal_type, Signal)):
            raise ConfigurationError(f"signal_type must be a Signal subclass, got {signal_type!r}")

        def decorate(func: H) -> H:
            self.observer.subscribe(signal_type, func)
            return func

        return decorate

    def set_authorizer(self, authorize: Authorizer | None) -> None:
        self.observer.set_authorizer(authorize)

    # -- flows -----------------------------------------------------------------------------
    async def flow(
        self,
        graph: OperationGraph | Any,
        *,
        context: Mapping[str, Any] | None = None,
        parallel: bool = True,
        max_concurrent: int | None = 5,
        default_branch: BranchRef | None = None,
        on_progress: ProgressCallback | None = None,
        fail_fast: bool = False,
        verbose: bool = False,
    ) -> dict[str, Any]:
        """Run an operation graph; return upstream's result keys.

        ``completed_operations`` (node ids in completion order), ``operation_results`` (by
        node id; a failed node's entry is ``{"error": ...}``), ``final_context`` (``context``
        plus each completed node's result as ``"<name or id>_result"``, plus any ``"context"``
        mapping a node returned), ``skipped_operations``, ``failed_operations`` (node id ->
        exception) and ``skip_reasons`` (node id -> why).

        Each node is one top-level turn on its branch: a fork of ``default_branch`` (default:
        the session's), the branch it was pinned to, or with ``inherit_context`` its first
        dependency's. Its dependencies' results and ``context`` reach its ``context=``. At
        most ``max_concurrent`` nodes run at once (None: no limit); ``parallel=False`` runs
        one at a time in dependency order, insertion order first. ``on_progress(op_id,
        branch_name, status, elapsed_s)`` (sync or async) hears ``started``, ``completed``,
        ``failed``, ``skipped`` and ``cancelled``. ``verbose`` is accepted for upstream
        compatibility (flows log on ``lionagi.flow``).

        Concurrency contract: the flow is one task group. A failed node's dependents are
        skipped and independent nodes go on, unless ``fail_fast=True``: then the first
        failure cancels the flow and is raised as itself. Cancelling the caller cancels the
        flow: running node turns end with ``RunFailed``, unstarted nodes never start, and no
        task outlives the call. Raises :class:`~lionagi.errors.GraphCycleError` before
        anything runs if the graph has a cycle.
        """
        options = _flow_options(locals())
        from lionagi.session.flow import run_flow

        return await run_flow(self, graph, **options)

    @same_parameters(flow)
    def flow_stream(self, arguments: dict[str, Any]) -> FlowStream:
        """The flow's node outcomes as they happen, one :class:`~lionagi.session.flow.FlowEvent`
        per node (``operation_id``, ``name``, ``status``, ``result``)::

            async with session.flow_stream(graph) as events:
                async for event in events:
                    ...

        The flow runs while the ``async with`` block is open; leaving the block early
        cancels it. After the block, ``events.result`` holds :meth:`flow`'s result dict if the
        flow finished. A bare ``async for`` without ``async with`` raises a
        :class:`~lionagi.errors.FlowError` that shows this form.
        """
        from lionagi.session.flow import FlowStream

        return FlowStream(self, arguments["graph"], _flow_options(arguments))

    # -- used by flows -----------------------------------------------------------------------
    def _resolve_default(self, branch: BranchRef | None) -> Branch:
        return self.default_branch if branch is None else self._resolve_pinned(branch, "flow")

    def _resolve_pinned(self, branch: BranchRef, where: str) -> Branch:
        from lionagi.session.branch import Branch

        if isinstance(branch, Branch) and branch._session is None:
            self.include_branches(branch)
        found = self.get_branch(branch, None)
        if found is None:
            raise FlowError(
                f"{where}: branch {branch!r} is not in this session; pass a Branch of this "
                "session, its id or its name"
            )
        return found

    def _fork_for_flow(self, base: Branch, name: str | None) -> Branch:
        """A branch for one flow node: ``base``'s history and tools, sharing its models (so
        their concurrency and rate limits hold across the flow), added to this session."""
        from lionagi.session.branch import Branch

        fork = Branch(
            chat_model=base.chat_model,
            parse_model=base._parse_model,
            messages=base.msgs.snapshot(),
            name=name or base.name,
            user=base.user,
        )
        fork._tools = base.tools.copy()
        self.include_branches(fork)
        return fork
