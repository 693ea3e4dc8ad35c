"""A Session owns branches and the one observer bus they report to."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any
from uuid import UUID

from lionagi.session.observer import Authorizer, Handler, Observer
from lionagi.session.signal import Signal

if TYPE_CHECKING:
    from lionagi.session.branch import Branch

__all__ = ["Session"]


class Session:
    """Branches plus an observer bus.

    ``session.observe(RunEnd, handler)`` subscribes ``handler(signal, session)`` (sync or async)
    to every ``RunEnd`` of every branch of this session. ``authorize`` (sync or async,
    ``(branch, action_request) -> bool``) gates every tool call of its branches.
    """

    def __init__(self, *, authorize: Authorizer | None = None) -> None:
        self.observer = Observer(self)
        self.observer.set_authorizer(authorize)
        self._branches: dict[UUID, Branch] = {}

    # -- branches --------------------------------------------------------------------------
    def new_branch(self, **kwargs: Any) -> Branch:
        """Create a Branch (same keywords as ``Branch(...)``) that reports to this session."""
        from lionagi.session.branch import Branch

        branch = Branch(**kwargs)
        self.include_branches(branch)
        return branch

    def include_branches(self, branches: Branch | Iterable[Branch]) -> None:
        """Attach existing branches. A branch belongs to at most one session."""
        from lionagi.session.branch import Branch

        items = [branches] if isinstance(branches, Branch) else list(branches)
        for branch in items:
            if not isinstance(branch, Branch):
                raise TypeError(f"expected Branch, got {type(branch).__name__}")
            if branch._session is not None and branch._session is not self:
                raise ValueError(f"Branch {branch.id} already belongs to another Session")
        for branch in items:
            branch._session = self
            branch._observer = self.observer
            self._branches[branch.id] = branch

    def remove_branch(self, branch: Branch | UUID) -> None:
        branch_id = branch if isinstance(branch, UUID) else branch.id
        removed = self._branches.pop(branch_id, None)
        if removed is not None:
            removed._session = None
            removed._observer = None

    @property
    def branches(self) -> tuple[Branch, ...]:
        return tuple(self._branches.values())

    def get_branch(self, branch_id: UUID) -> Branch:
        try:
            return self._branches[branch_id]
        except KeyError:
            raise KeyError(f"no branch {branch_id} in this session") from None

    def __iter__(self) -> Iterator[Branch]:
        return iter(self._branches.values())

    def __len__(self) -> int:
        return len(self._branches)

    # -- observing -------------------------------------------------------------------------
    def observe(self, signal_type: type[Signal], handler: Handler) -> Any:
        """Subscribe ``handler(signal, session)``; returns a function that unsubscribes it."""
        return self.observer.subscribe(signal_type, handler)

    def set_authorizer(self, authorize: Authorizer | None) -> None:
        self.observer.set_authorizer(authorize)
