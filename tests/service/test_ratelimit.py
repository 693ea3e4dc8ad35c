"""Rate limits per model object: sliding windows, FIFO, cancellation-safe, shared by branches.

Time is virtual (``VirtualClock`` or a clock the test advances by hand); nothing sleeps.
"""

from __future__ import annotations

import bisect
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import Instruction, Message
from lionagi.service.errors import RateLimitQueueFull
from lionagi.service.imodel import iModel
from lionagi.service.ratelimit import RateLimiter, estimate_tokens
from lionagi.session.session import Session
from lionagi.testing import FunctionModel, VirtualClock

ASK: list[Message] = [Instruction(instruction="hi")]


class ManualClock:
    """Time that moves only when the test calls :meth:`advance`; sleepers wake when it passes
    their deadline."""

    def __init__(self) -> None:
        self.time = 0.0
        self._sleepers: list[tuple[float, anyio.Event]] = []
        self.sleeping = anyio.Event()

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        event = anyio.Event()
        self._sleepers.append((self.time + seconds, event))
        self.sleeping.set()
        await event.wait()

    async def advance(self, seconds: float) -> None:
        self.time += seconds
        due = [s for s in self._sleepers if s[0] <= self.time]
        self._sleepers = [s for s in self._sleepers if s[0] > self.time]
        for _, event in due:
            event.set()
        for _ in range(20):  # let the woken callers run to their next wait
            await checkpoint()


def max_in_any_window(starts: list[float], interval: float) -> int:
    """The most starts inside any half-open window [t, t + interval)."""
    starts = sorted(starts)
    return max(
        bisect.bisect_left(starts, start + interval) - index for index, start in enumerate(starts)
    )


@pytest.mark.slow
async def test_no_window_exceeds_the_limit_with_1000_callers_on_50_branches() -> None:
    clock = VirtualClock()
    starts: list[float] = []

    async def answer(messages: list[Message], **options: Any) -> str:
        starts.append(clock.now())  # async: runs straight after admission, no checkpoint
        return "ok"

    limit, interval = 7, 1.0
    model = FunctionModel(answer, limit_requests=limit, interval=interval, clock=clock)
    session = Session()
    branches = [session.new_branch(chat_model=model) for _ in range(50)]
    done: list[int] = []

    async def caller(branch: Any, n: int) -> None:
        await branch.chat(f"question {n}")
        done.append(n)

    async with anyio.create_task_group() as tg:
        for n in range(1000):
            tg.start_soon(caller, branches[n % 50], n)

    assert len(done) == 1000
    assert len(starts) == 1000
    assert max_in_any_window(starts, interval) == limit
    # the limit is also reached: 1000 requests at 7 per second take (1000 / 7 - 1) seconds
    assert clock.now() == pytest.approx((1000 // limit - (1000 % limit == 0)) * interval)


async def test_callers_are_served_first_come_first_served() -> None:
    clock = VirtualClock()
    order: list[int] = []

    async def answer(messages: list[Message], **options: Any) -> str:
        last = messages[-1]
        assert isinstance(last, Instruction)
        order.append(int(last.instruction or ""))
        return "ok"

    model = FunctionModel(answer, limit_requests=3, interval=5.0, clock=clock)
    async with anyio.create_task_group() as tg:
        for n in range(40):
            tg.start_soon(model.invoke, [Instruction(instruction=str(n))])
            await checkpoint()  # each caller reaches the limiter before the next starts

    assert order == list(range(40))


async def test_cancelled_waiters_free_their_place() -> None:
    clock = ManualClock()
    limiter = RateLimiter(limit_requests=1, interval=10.0, clock=clock)
    admitted: list[str] = []

    async def caller(name: str, scope: anyio.CancelScope) -> None:
        with scope:
            await limiter.acquire()
            admitted.append(name)

    scopes = {name: anyio.CancelScope() for name in "ABCDE"}
    async with anyio.create_task_group() as tg:
        for name in "ABCDE":
            tg.start_soon(caller, name, scopes[name])
            await checkpoint()
        await clock.sleeping.wait()
        assert admitted == ["A"]
        assert limiter.statistics().waiting == 4
        scopes["C"].cancel()  # a waiter in the middle of the line
        scopes["B"].cancel()  # the first in line, asleep until the window frees
        for _ in range(5):
            await checkpoint()
        assert limiter.statistics().waiting == 2
        await clock.advance(10.0)
        assert admitted == ["A", "D"]
        await clock.advance(10.0)
        assert admitted == ["A", "D", "E"]

    assert limiter.statistics().waiting == 0
    # the cancelled callers took no capacity: one request per window, nothing else started
    assert limiter.statistics().requests_in_window == 1


async def test_a_cancelled_branch_turn_takes_no_place() -> None:
    clock = ManualClock()
    calls: list[str] = []

    def answer(messages: list[Message], **options: Any) -> str:
        calls.append(str(messages[-1]))
        return "ok"

    model = FunctionModel(answer, limit_requests=1, interval=10.0, clock=clock)
    session = Session()
    first, second, third = (session.new_branch(chat_model=model) for _ in range(3))
    await first.chat("a")
    waiting = anyio.CancelScope()

    async def ask_second() -> None:
        with waiting:
            await second.chat("b")

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask_second)
        await clock.sleeping.wait()  # the second turn waits for the window
        waiting.cancel()

    assert len(calls) == 1
    limiter = model.rate_limiter
    assert limiter is not None
    assert limiter.statistics().waiting == 0
    assert limiter.statistics().requests_in_window == 1  # the cancelled turn took no place
    await clock.advance(10.0)
    assert await third.chat("c") == "ok"
    assert len(calls) == 2


async def test_token_limit_charges_the_estimate_then_the_real_usage() -> None:
    clock = VirtualClock()
    starts: list[float] = []

    def answer(messages: list[Message], **options: Any) -> str:
        starts.append(clock.now())
        return "ok"

    model = FunctionModel(answer, limit_tokens=100, interval=60.0, clock=clock)
    request = model.request(ASK, max_tokens=60)
    assert estimate_tokens(request) >= 60
    await model.invoke(ASK, max_tokens=60)
    limiter = model.rate_limiter
    assert limiter is not None
    # settled with the reply's real usage, far below the 60-token estimate
    assert limiter.statistics().tokens_in_window < 10
    await model.invoke(ASK, max_tokens=60)  # fits now that the first charge was settled
    assert starts == [0.0, 0.0]
    with pytest.raises(ConfigurationError, match="limit_tokens=100"):
        await model.invoke(ASK, max_tokens=500)


async def test_token_budget_makes_the_next_request_wait_for_the_window() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(limit_tokens=100, interval=60.0, clock=clock)
    await limiter.acquire(70)
    clock.advance(5.0)
    await limiter.acquire(20)
    await limiter.acquire(30)  # 70 + 20 + 30 > 100: waits until the 70 leave the window
    assert clock.now() == 60.0


async def test_queue_capacity_bounds_the_waiting_callers() -> None:
    clock = ManualClock()
    limiter = RateLimiter(limit_requests=1, interval=1.0, queue_capacity=2, clock=clock)
    async with anyio.create_task_group() as tg:
        await limiter.acquire()
        tg.start_soon(limiter.acquire)
        tg.start_soon(limiter.acquire)
        await clock.sleeping.wait()
        await checkpoint()
        with pytest.raises(RateLimitQueueFull, match="queue_capacity=2"):
            await limiter.acquire()
        await clock.advance(1.0)
        await clock.advance(1.0)


async def test_branches_share_the_model_limiter_and_copies_do_not() -> None:
    model = FunctionModel(lambda messages, **o: "ok", limit_requests=5, clock=VirtualClock())
    session = Session()
    a, b = session.new_branch(chat_model=model), session.new_branch(chat_model=model)
    await a.chat("x")
    await b.chat("y")
    assert model.rate_limiter is not None
    assert model.rate_limiter.statistics().requests_in_window == 2
    copy = model.copy()
    assert copy.rate_limiter is not None
    assert copy.rate_limiter is not model.rate_limiter
    assert copy.rate_limiter.statistics().requests_in_window == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"limit_requests": 0}, "limit_requests"),
        ({"limit_tokens": -5}, "limit_tokens"),
        ({"interval": 0}, "interval"),
        ({"queue_capacity": True}, "queue_capacity"),
    ],
)
def test_bad_rate_settings_are_rejected(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        iModel("openai", "m", api_key="k", **kwargs)


def test_upstream_names_are_settings_not_request_options() -> None:
    model = iModel(
        "openai", "m", api_key="k", limit_requests=10, limit_tokens=1000, queue_capacity=50
    )
    assert model.request_defaults == {}
    request = model.request(ASK)
    assert "limit_requests" not in request.options
