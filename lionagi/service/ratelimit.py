"""Requests and tokens per interval for one model object, shared by every caller.

:class:`RateLimiter` keeps a sliding-window log: a request may start when, counting it, no
window of ``interval`` seconds holds more than ``limit_requests`` starts or more than
``limit_tokens`` tokens. Callers are served strictly first come, first served; only the first in
line sleeps (until the oldest start in the window leaves it), the others wait for their turn.
A token charge starts as an estimate (input plus the maximum output) and is settled with the
real usage once the reply is known.

The names and meaning follow upstream lionagi's ``iModel(limit_requests=, limit_tokens=,
interval=, queue_capacity=)``: ``interval`` defaults to 60 seconds, and ``queue_capacity`` is
how many callers may wait at once (more raise :class:`RateLimitQueueFull`).
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from anyio.lowlevel import checkpoint_if_cancelled

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import Instruction, Message
from lionagi.protocols.tokens import get_default_counter
from lionagi.service.clock import ANYIO_CLOCK, Clock
from lionagi.service.errors import RateLimitQueueFull

if TYPE_CHECKING:
    from lionagi.service.types import ModelRequest

__all__ = ["RateLimitGrant", "RateLimitStatistics", "RateLimiter", "estimate_tokens"]

#: request options that bound the reply's length, by provider family
_MAX_OUTPUT_OPTIONS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
#: per-message overhead of chat formats (role markers, separators)
_PER_MESSAGE = 4


def estimate_tokens(request: ModelRequest) -> int:
    """Tokens a request may use: its estimated input plus the maximum output it allows.

    The input is counted with the default (offline, approximate) token counter; the charge is
    settled with the provider's reported usage once the reply arrives.
    """
    counter = get_default_counter()
    total = 0
    for message in request.messages:
        text = message.render_text() if isinstance(message, Instruction) else _text_of(message)
        total += counter.count(text) + _PER_MESSAGE
    if request.tools:
        total += counter.count(json.dumps(request.tools, default=str))
    for name in _MAX_OUTPUT_OPTIONS:
        value = request.options.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            total += value
            break
    return total


def _text_of(message: Message) -> str:
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    return message.model_dump_json(exclude={"id", "created_at"})


class RateLimitGrant:
    """One admitted request: when it started and the tokens it is charged with."""

    __slots__ = ("_limiter", "started", "tokens")

    def __init__(self, limiter: RateLimiter | None, started: float, tokens: int) -> None:
        self._limiter = limiter  # None once the grant has left the window
        self.started = started
        self.tokens = tokens

    def settle(self, tokens: int) -> None:
        """Replace the estimated charge with the tokens the request really used."""
        tokens = max(int(tokens), 0)
        if self._limiter is not None:
            self._limiter._tokens += tokens - self.tokens
        self.tokens = tokens


@dataclass(frozen=True, slots=True)
class RateLimitStatistics:
    """A snapshot: callers waiting, and requests and tokens inside the current window."""

    waiting: int
    requests_in_window: int
    tokens_in_window: int


class _Waiter:
    __slots__ = ("event", "tokens")

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.event = anyio.Event()


class RateLimiter:
    """FIFO admission of requests under request and token limits per ``interval`` seconds.

    A limit of ``None`` is no limit. Bound to the event loop that first uses it (an
    :class:`~lionagi.service.imodel.iModel` makes one per loop while idle).
    """

    def __init__(
        self,
        *,
        limit_requests: int | None = None,
        limit_tokens: int | None = None,
        interval: float = 60.0,
        queue_capacity: int | None = None,
        clock: Clock = ANYIO_CLOCK,
    ) -> None:
        check_rate_settings(limit_requests, limit_tokens, interval, queue_capacity)
        self.limit_requests = limit_requests
        self.limit_tokens = limit_tokens
        self.interval = float(interval)
        self.queue_capacity = queue_capacity
        self.clock = clock
        self._log: deque[RateLimitGrant] = deque()  # admitted requests still in the window
        self._tokens = 0  # the tokens charged to the requests in _log
        self._waiters: deque[_Waiter] = deque()

    # -- admission -----------------------------------------------------------------------
    async def acquire(self, tokens: int = 0) -> RateLimitGrant:
        """Wait for this request's place and return its grant (charged with ``tokens``).

        Concurrency: raises a pending cancellation first; yields to the event loop only when it
        has to wait. Cancel-safe: a caller cancelled while waiting leaves the line, takes no
        capacity, and lets the next caller move up.
        """
        tokens = self._fitting(tokens)
        await checkpoint_if_cancelled()
        if not self._waiters:
            delay = self._delay(self.clock.now(), tokens)
            if delay <= 0:
                return self._admit(tokens)
        if self.queue_capacity is not None and len(self._waiters) >= self.queue_capacity:
            raise RateLimitQueueFull(
                f"{len(self._waiters)} requests already wait for this model's rate limit "
                f"(queue_capacity={self.queue_capacity}); raise queue_capacity, leave it unset "
                "for no bound, or send fewer requests at once"
            )
        waiter = _Waiter(tokens)
        self._waiters.append(waiter)
        try:
            await self._wait_in_line(waiter)
        except BaseException:
            self._leave(waiter)
            raise
        self._leave(waiter)
        return self._admit(tokens)

    def _fitting(self, tokens: int) -> int:
        """``tokens`` as a count this limiter can ever admit."""
        tokens = max(int(tokens), 0)
        if self.limit_tokens is not None and tokens > self.limit_tokens:
            raise ConfigurationError(
                f"a request estimated at {tokens} tokens can never fit limit_tokens="
                f"{self.limit_tokens} per {self.interval:g}s; raise limit_tokens or lower "
                "max_tokens"
            )
        return tokens

    async def _wait_in_line(self, waiter: _Waiter) -> None:
        """Wait until ``waiter`` is first in line and its request fits the limits."""
        while True:
            if self._waiters[0] is not waiter:
                await waiter.event.wait()
                waiter.event = anyio.Event()
                continue
            delay = self._delay(self.clock.now(), waiter.tokens)
            if delay <= 0:
                return
            await self.clock.sleep(delay)

    def _leave(self, waiter: _Waiter) -> None:
        head = bool(self._waiters) and self._waiters[0] is waiter
        try:
            self._waiters.remove(waiter)
        except ValueError:  # pragma: no cover - removed once, by construction
            return
        if head and self._waiters:
            self._waiters[0].event.set()

    def _admit(self, tokens: int) -> RateLimitGrant:
        grant = RateLimitGrant(self, self.clock.now(), tokens)
        self._log.append(grant)
        self._tokens += tokens
        return grant

    def _delay(self, now: float, tokens: int) -> float:
        """Seconds until a request of ``tokens`` fits every limit (<= 0: it fits now)."""
        horizon = now - self.interval
        log = self._log
        while log and log[0].started <= horizon:
            gone = log.popleft()
            gone._limiter = None
            self._tokens -= gone.tokens
        delay = 0.0
        limit = self.limit_requests
        if limit is not None and len(log) >= limit:
            # the start that must leave the window for this one to fit
            delay = log[len(log) - limit].started - horizon
        budget = self.limit_tokens
        if budget is not None and tokens:
            used = self._tokens
            if used + tokens > budget:
                for grant in log:
                    used -= grant.tokens
                    if used + tokens <= budget:
                        delay = max(delay, grant.started - horizon)
                        break
        return delay

    # -- inspection ----------------------------------------------------------------------
    def statistics(self) -> RateLimitStatistics:
        now = self.clock.now()
        live = [g for g in self._log if g.started > now - self.interval]
        return RateLimitStatistics(
            waiting=len(self._waiters),
            requests_in_window=len(live),
            tokens_in_window=sum(g.tokens for g in live),
        )

    def idle(self) -> bool:
        """No caller is waiting (the limiter may be replaced for another event loop)."""
        return not self._waiters

    def __repr__(self) -> str:
        return (
            f"RateLimiter(limit_requests={self.limit_requests!r}, limit_tokens="
            f"{self.limit_tokens!r}, interval={self.interval:g})"
        )


def check_rate_settings(
    limit_requests: object, limit_tokens: object, interval: object, queue_capacity: object
) -> None:
    """Raise :class:`ConfigurationError` naming the first unusable rate-limit setting."""
    for name, value in (
        ("limit_requests", limit_requests),
        ("limit_tokens", limit_tokens),
        ("queue_capacity", queue_capacity),
    ):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            raise ConfigurationError(f"{name} must be a positive int or None, got {value!r}")
    if (
        not isinstance(interval, int | float)
        or isinstance(interval, bool)
        or not math.isfinite(interval)
        or interval <= 0
    ):
        raise ConfigurationError(f"interval must be a positive number of seconds, got {interval!r}")
