"""What a turn adds around each model call: retry signals and usage limits.

The model's own policies (retries, rate limits, fallback) run inside ``iModel.invoke``; the turn
tells observers about each retried attempt (:class:`~lionagi.session.signal.ModelRetry`) and
checks its :class:`~lionagi.service.usage_limits.UsageLimits` before every call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lionagi.session.signal import ModelRetry

if TYPE_CHECKING:
    from lionagi.operations.types import TurnScope
    from lionagi.service.retry import RetryAttempt, RetryHook
    from lionagi.session.branch import Branch

__all__ = ["check_usage_limits", "retry_hook"]


def check_usage_limits(branch: Branch, scope: TurnScope) -> None:
    """Refuse the turn's next model call if it would break the Branch's usage limits."""
    limits = branch.usage_limits
    if limits is not None:
        context = scope.context
        limits.check_before_request(context.usage, context.model_attempts)


def retry_hook(branch: Branch, scope: TurnScope) -> RetryHook | None:
    """A hook that emits :class:`ModelRetry` for the turn, or ``None`` if nobody listens."""
    observer = branch._observer
    if observer is None or not observer.wants(ModelRetry):
        return None
    turn_id = scope.turn_id

    async def emit(attempt: RetryAttempt) -> None:
        error = attempt.error
        await observer.emit(
            ModelRetry(
                branch_id=branch.id,
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
