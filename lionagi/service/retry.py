"""Retries with exponential backoff and jitter, as a model policy.

:class:`RetryPolicy` says which failures of one model call are worth another attempt and how
long to wait first; :func:`call_with_retry` runs the attempts. The loop is tenacity's
``AsyncRetrying`` driven by a :class:`~lionagi.service.clock.Clock` (anyio time by default), so
it works on asyncio and trio alike and its waits follow trio's ``MockClock`` or a
:class:`lionagi.testing.VirtualClock`.

What is retried: rate limiting (429, waiting ``Retry-After`` when the provider sends it),
connection failures, and — for idempotent requests only — server errors (5xx, 408, 409) and
timeouts. Authentication, bad requests, unreadable answers and parse failures are raised at
once. A cancellation is never retried and stops the loop at once, also during a backoff wait.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from lionagi._interrupt import GuardedClock, Interrupt, guarded_hook
from lionagi.errors import ConfigurationError
from lionagi.service.clock import ANYIO_CLOCK, Clock
from lionagi.service.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
)

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = ["DEFAULT_RETRY", "RetryAttempt", "RetryPolicy", "call_with_retry"]

logger = logging.getLogger("lionagi.service.retry")

T = TypeVar("T")

#: HTTP statuses (besides 429 and 5xx) that mean "try again" for an idempotent request
_RETRY_STATUSES = frozenset({408, 409})


def _seconds(value: object) -> bool:
    """A finite number >= 0 (not a bool)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _count(value: object) -> bool:
    """An int >= 1 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _factor(value: object) -> bool:
    """A number >= 1 (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 1


def _exception_types(value: object) -> bool:
    return isinstance(value, tuple) and all(
        isinstance(t, type) and issubclass(t, BaseException) for t in value
    )


_SECONDS = "a finite number of seconds >= 0"


def _setting(default: Any, valid: Callable[[object], bool], must_be: str) -> Any:
    """A :class:`RetryPolicy` field that carries its own check: ``valid(value)``, and what the
    value ``must_be`` when it fails (for the error)."""
    return field(default=default, metadata={"valid": valid, "must_be": must_be})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How one model call is retried.

    ``attempts`` counts every try, the first included (``1`` never retries). The wait before
    attempt *n + 1* is ``min(max_wait, initial * exp_base ** (n - 1)) + uniform(0, jitter)``
    seconds, unless the provider said ``Retry-After``: then exactly that. A ``Retry-After``
    longer than ``max_retry_after`` is not waited for; the :class:`RateLimitError` is raised so
    the caller can decide. ``retry_on`` adds exception types of your own to retry.
    """

    attempts: int = _setting(3, _count, "an int >= 1 (the first try counts)")
    initial: float = _setting(0.5, _seconds, _SECONDS)
    max_wait: float = _setting(8.0, _seconds, _SECONDS)
    exp_base: float = _setting(2.0, _factor, "a number >= 1")
    jitter: float = _setting(0.5, _seconds, _SECONDS)
    max_retry_after: float = _setting(60.0, _seconds, _SECONDS)
    retry_on: tuple[type[BaseException], ...] = _setting(
        (), _exception_types, "a tuple of exception classes"
    )

    def __post_init__(self) -> None:
        for setting in fields(self):
            value = getattr(self, setting.name)
            if not setting.metadata["valid"](value):
                raise ConfigurationError(
                    f"RetryPolicy.{setting.name} must be {setting.metadata['must_be']}, "
                    f"got {value!r}"
                )

    def to_dict(self) -> dict[str, float | int]:
        """The numeric settings (``retry_on`` types are code, not configuration)."""
        return {name: getattr(self, name) for name in _NUMERIC}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetryPolicy:
        unknown = sorted(set(data) - set(_NUMERIC))
        if unknown:
            raise ConfigurationError(
                f"RetryPolicy.from_dict: unknown settings {unknown}; known: {sorted(_NUMERIC)}"
            )
        return cls(**data)

    def retryable(self, error: BaseException, *, idempotent: bool = True) -> bool:
        """Whether ``error`` from one attempt is worth another (cancellations never are).

        ``idempotent`` is False for requests with side effects (an agentic CLI that may have
        run tools): then only failures where the provider did not take the request — rate
        limiting, a refused or reset connection — are retried.
        """
        if isinstance(error, RateLimitError):
            return error.retry_after is None or error.retry_after <= self.max_retry_after
        if isinstance(error, ProviderConnectionError):
            return True
        if self.retry_on and isinstance(error, self.retry_on):
            return True
        if not idempotent:
            return False
        if isinstance(error, ServerError | ProviderTimeout):
            return True
        return isinstance(error, ProviderError) and error.status in _RETRY_STATUSES

    def backoff(self, failed_attempt: int, error: BaseException | None) -> float:
        """Seconds to wait after attempt ``failed_attempt`` (1-based) failed with ``error``."""
        if isinstance(error, RateLimitError) and error.retry_after is not None:
            return max(error.retry_after, 0.0)
        base = self.initial * self.exp_base ** (failed_attempt - 1)
        base = min(self.max_wait, base) if math.isfinite(base) else self.max_wait
        # jitter spreads the retries of many callers that failed together
        return base + random.uniform(0.0, self.jitter) if self.jitter else base


#: the settings :meth:`RetryPolicy.to_dict` and ``from_dict`` carry: all but ``retry_on``
_NUMERIC = tuple(setting.name for setting in fields(RetryPolicy) if setting.name != "retry_on")

#: the policy an iModel uses when none is given: 3 attempts, 0.5 s then 1 s (+ up to 0.5 s)
DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True, slots=True)
class RetryAttempt:
    """One failed attempt that will be retried: which, why, and how long until the next."""

    attempt: int
    error: BaseException
    wait: float
    provider: str | None = None
    model: str | None = None

    @property
    def status(self) -> int | None:
        return getattr(self.error, "status", None)


RetryHook = Callable[[RetryAttempt], Awaitable[None] | None]


async def call_with_retry(
    policy: RetryPolicy,
    attempt: Callable[[], Awaitable[T]],
    *,
    idempotent: bool = True,
    clock: Clock = ANYIO_CLOCK,
    on_retry: RetryHook | None = None,
    provider: str | None = None,
    model: str | None = None,
    guarded_by: Interrupt | None = None,
) -> tuple[T, int]:
    """Run ``attempt()`` until it succeeds, fails for good, or ``policy.attempts`` are used.

    Returns the result and how many attempts it took. The last failure is raised unchanged.
    ``on_retry`` is called (and awaited, if it returns an awaitable) before each backoff wait;
    its own exceptions are logged, never raised. With ``guarded_by`` (a stream turn's
    interrupt) the backoff waits and ``on_retry`` are guarded waits of it (wrapped once a
    retry is needed: a call that succeeds at once pays nothing for it).

    Concurrency: checkpoints wherever ``attempt`` does and in each wait. Cancel-safe: a
    cancellation inside an attempt or a wait propagates at once and nothing is retried.
    """
    # The first attempt runs on its own: most calls succeed, and they should not pay for
    # setting up the retry loop (tenacity's per-call state costs more than the call itself
    # for a fast model). Its failure is handled exactly as the loop handles the later ones.
    try:
        return await attempt(), 1
    except Exception as error:
        if policy.attempts == 1 or not policy.retryable(error, idempotent=idempotent):
            raise
        if guarded_by is not None:
            clock = GuardedClock(clock, guarded_by)
            if on_retry is not None:
                on_retry = guarded_hook(on_retry, guarded_by)
        first_wait = policy.backoff(1, error)
        await _notify(on_retry, RetryAttempt(1, error, first_wait, provider, model))
    await clock.sleep(first_wait)
    # imported here: a program whose calls succeed at once never loads tenacity
    from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

    count = 1

    async def counted() -> T:
        nonlocal count
        count += 1
        return await attempt()

    async def before_sleep(state: RetryCallState) -> None:
        if on_retry is None:
            return
        outcome = state.outcome
        assert outcome is not None
        assert state.next_action is not None
        error = outcome.exception()
        assert error is not None
        wait = float(state.next_action.sleep)
        await _notify(on_retry, RetryAttempt(count, error, wait, provider, model))

    def wait(state: RetryCallState) -> float:
        outcome = state.outcome
        error = None if outcome is None else outcome.exception()
        return policy.backoff(count, error)

    retrying = AsyncRetrying(
        sleep=clock.sleep,
        stop=stop_after_attempt(policy.attempts - 1),
        wait=wait,
        retry=retry_if_exception(lambda exc: policy.retryable(exc, idempotent=idempotent)),
        before_sleep=before_sleep,
        reraise=True,
    )
    result: T = await retrying(counted)
    return result, count


async def _notify(on_retry: RetryHook | None, record: RetryAttempt) -> None:
    """Tell ``on_retry`` about a failed attempt; its own failure is logged, never raised."""
    if on_retry is None:
        return
    try:
        result = on_retry(record)
        if result is not None:
            await result
    except Exception:
        logger.exception("retry observer failed for attempt %d", record.attempt)
