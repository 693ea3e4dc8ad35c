"""The observer bus: handlers subscribe per signal type; failures are logged, never raised."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from anyio import CancelScope, get_cancelled_exc_class

from lionagi.errors import ConfigurationError
from lionagi.session.signal import Signal

if TYPE_CHECKING:
    from lionagi.protocols.messages import ActionRequest

__all__ = ["Authorizer", "Handler", "Observer"]

logger = logging.getLogger("lionagi.observer")

Handler: TypeAlias = Callable[[Any, Any], Awaitable[None] | None]
Authorizer: TypeAlias = Callable[[Any, "ActionRequest"], Awaitable[bool] | bool]


def _log_failure(handler: Handler, signal: Signal) -> None:
    logger.exception(
        "observer handler %r failed on %s", getattr(handler, "__name__", handler), signal.kind
    )


class Observer:
    """Delivers signals to handlers registered for their type or any base type.

    ``handler(signal, session)`` may be sync or async. Handlers of one signal run one after the
    other in subscription order; an ``Exception`` from one is logged and the rest still run.
    Cancellation of one handler does not skip the others: each is still called (in the caller's
    cancelled scope, so an async handler is cancelled at its first checkpoint), then the
    cancellation propagates. Other ``BaseException`` propagate at once.
    """

    __slots__ = ("_authorizer", "_by_type", "_handlers", "session")

    def __init__(self, session: Any = None) -> None:
        self.session = session
        self._handlers: list[tuple[type[Signal], Handler]] = []
        self._by_type: dict[type[Signal], tuple[Handler, ...]] = {}
        self._authorizer: Authorizer | None = None

    def subscribe(self, signal_type: type[Signal], handler: Handler) -> Callable[[], None]:
        """Call ``handler`` for every signal that is a ``signal_type``; returns an unsubscriber."""
        if not (isinstance(signal_type, type) and issubclass(signal_type, Signal)):
            raise ConfigurationError(f"signal_type must be a Signal subclass, got {signal_type!r}")
        if not callable(handler):
            raise ConfigurationError(f"handler must be callable, got {handler!r}")
        entry = (signal_type, handler)
        self._handlers.append(entry)
        self._by_type.clear()

        def unsubscribe() -> None:
            if entry in self._handlers:
                self._handlers.remove(entry)
                self._by_type.clear()

        return unsubscribe

    def handlers_for(self, signal_type: type[Signal]) -> tuple[Handler, ...]:
        found = self._by_type.get(signal_type)
        if found is None:
            found = tuple(h for t, h in self._handlers if issubclass(signal_type, t))
            self._by_type[signal_type] = found
        return found

    def wants(self, signal_type: type[Signal]) -> bool:
        """Whether any handler would receive a signal of this type (lets emitters skip work)."""
        found = self._by_type.get(signal_type)
        return bool(self.handlers_for(signal_type) if found is None else found)

    async def emit(self, signal: Signal, *, shielded: bool = False) -> None:
        """Deliver ``signal`` to its handlers in order. Checkpoints only inside async handlers;
        a cancellation is re-raised after every handler was called (see the class).

        ``shielded=True`` awaits each async handler in a cancel scope shielded from outside
        cancellation, as if the whole call were shielded, without the cost of a cancel scope
        when every handler is synchronous.
        """
        rest = self.send(signal, shielded=shielded)
        if rest is not None:
            await rest

    def send(self, signal: Signal, *, shielded: bool = False) -> Awaitable[None] | None:
        """Call ``signal``'s handlers in order, as :meth:`emit` does, without awaiting.

        Returns ``None`` when every handler has run (no handler returned an awaitable, none was
        cancelled); otherwise an awaitable that must be awaited at once, which awaits that
        handler's result and calls the rest. So a signal whose handlers are all synchronous is
        delivered without a coroutine of its own. Does not checkpoint.
        """
        handlers = self._by_type.get(type(signal)) or self.handlers_for(type(signal))
        session = self.session
        index = 0
        for handler in handlers:
            index += 1
            try:
                outcome = handler(signal, session)
            except Exception:
                _log_failure(handler, signal)
                continue
            except get_cancelled_exc_class() as exc:
                return self._finish(signal, handlers, index, None, exc, shielded)
            if outcome is not None and inspect.isawaitable(outcome):
                return self._finish(signal, handlers, index, outcome, None, shielded)
        return None

    async def _finish(
        self,
        signal: Signal,
        handlers: tuple[Handler, ...],
        index: int,
        outcome: Awaitable[None] | None,
        cancelled: BaseException | None,
        shielded: bool,
    ) -> None:
        """Await ``outcome`` (the result of ``handlers[index - 1]``), then call and await the
        handlers from ``index`` on; re-raise the first cancellation once all were called."""
        session = self.session
        try:
            while True:
                if outcome is not None:
                    try:
                        if shielded:
                            with CancelScope(shield=True):
                                await outcome
                        else:
                            await outcome
                    except get_cancelled_exc_class() as exc:
                        if cancelled is None:
                            cancelled = exc
                    except Exception:
                        _log_failure(handlers[index - 1], signal)
                    outcome = None
                if index == len(handlers):
                    break
                handler = handlers[index]
                index += 1
                try:
                    result = handler(signal, session)
                except get_cancelled_exc_class() as exc:
                    if cancelled is None:
                        cancelled = exc
                except Exception:
                    _log_failure(handler, signal)
                else:
                    if result is not None and inspect.isawaitable(result):
                        outcome = result
            if cancelled is not None:
                raise cancelled
        finally:
            del cancelled

    # -- the authorization gate used before tool calls ------------------------------------
    def set_authorizer(self, authorizer: Authorizer | None) -> None:
        """``authorizer(branch, action_request) -> bool`` (sync or async) gates every tool call."""
        self._authorizer = authorizer

    async def authorize(self, branch: Any, request: ActionRequest) -> bool:
        if self._authorizer is None:
            return True
        verdict = self._authorizer(branch, request)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return bool(verdict)
