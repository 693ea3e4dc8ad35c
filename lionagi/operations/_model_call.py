"""What a turn adds around each model call: control, providers, usage limits, retry signals.

:meth:`TurnScope.call_model <lionagi.operations.types.TurnScope.call_model>` (and its streamed
form) run :func:`prepare_call` before the model: poll the turn's control, gather the context
providers for a conversation request, and check the Branch's
:class:`~lionagi.service.usage_limits.UsageLimits`. The model's own policies (retries, rate
limits, fallback) run inside ``iModel.invoke``; the turn tells observers about each retried
attempt (:class:`~lionagi.session.signal.ModelRetry`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from lionagi.operations._prepare import apply_context_providers, request_messages
from lionagi.operations.turn import control_point, guard_wait
from lionagi.protocols.messages import RecordedCopy
from lionagi.session.control import check_control
from lionagi.session.signal import ModelRetry

if TYPE_CHECKING:
    from lionagi.operations.types import TurnScope
    from lionagi.protocols.messages import Instruction, Message
    from lionagi.service.retry import RetryAttempt, RetryHook
    from lionagi.session.branch import Branch
    from lionagi.session.observer import Observer

__all__ = ["checked_call", "close_stream", "prepare_call", "ready_call"]

logger = logging.getLogger("lionagi.turn")


async def prepare_call(
    scope: TurnScope,
    branch: Branch,
    ask: Instruction | None,
    pending: Sequence[Message],
    messages: Sequence[Message] | None,
) -> tuple[Sequence[Message], RetryHook | None]:
    """The request to send and its retry hook, once the call may go ahead.

    Raises what the turn's control says (BREAK, CANCEL) and
    :class:`~lionagi.errors.UsageLimitExceeded` when the call would break the Branch's limits.
    """
    context = scope.context
    if context.signals_pending:
        await control_point(scope)  # delivers them first, then applies the directive
    elif context.control is not None:
        check_control(scope)
    if messages is None:
        if ask is not None and branch.context_providers is not None:
            with guard_wait(scope):  # the providers' waits (a guarded stream body's step)
                await apply_context_providers(branch, ask, scope)
        messages = request_messages(branch, scope, pending)
    return checked_call(scope, branch, messages)


def ready_call(
    scope: TurnScope, branch: Branch, pending: Sequence[Message]
) -> tuple[Sequence[Message], RetryHook | None] | None:
    """:func:`prepare_call` of a conversation request at once, when it has nothing to wait for
    (no message signal to deliver, no context providers): what it returns, or ``None`` when
    the call must await :func:`prepare_call`. Raises as it does. Saves a stream's start the
    coroutine of a preparation that would not have suspended."""
    context = scope.context
    # signals pending (context.signals_pending, read without a property call), or providers
    if context.delivering or context.pending_signals or branch.context_providers is not None:
        return None
    if context.control is not None:
        check_control(scope)
    if context.provider_blocks:  # gathered earlier in the turn
        return checked_call(scope, branch, request_messages(branch, scope, pending))
    return checked_call(scope, branch, RecordedCopy(branch.msgs, None, pending))  # without a call


def checked_call(
    scope: TurnScope, branch: Branch, messages: Sequence[Message]
) -> tuple[Sequence[Message], RetryHook | None]:
    """``messages`` and the call's retry hook, once the usage limits allow the call."""
    limits = branch.usage_limits
    if limits is not None:
        context = scope.context
        limits.check_before_request(context.usage, context.model_attempts)
    observer = branch.observer  # nobody to tell (nearly always): no hook
    return messages, None if observer is None else _retry_hook(branch, scope, observer)


def _retry_hook(branch: Branch, scope: TurnScope, observer: Observer) -> RetryHook | None:
    """A hook that emits :class:`ModelRetry` for the turn, or ``None`` if nobody listens."""
    if not observer.wants(ModelRetry):
        return None
    branch_id, turn_id = branch.id, scope.turn_id

    async def emit(attempt: RetryAttempt) -> None:
        error = attempt.error
        await observer.emit(
            ModelRetry(
                branch_id=branch_id,
                turn_id=turn_id,
                attempt=attempt.attempt,
                wait=attempt.wait,
                error=f"{type(error).__name__}: {error}",
                status=attempt.status,
                provider=attempt.provider,
                model=attempt.model,
            )
        )

    return emit


async def close_stream(chunks: AsyncIterator[Any]) -> None:
    """Close a model stream; an error from closing is logged, never raised (ADR-0018 D4).
    Callers shield it, so a cancelled turn still closes its transport."""
    close = getattr(chunks, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception:
        logger.exception("closing a model stream failed")
