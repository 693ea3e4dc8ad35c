"""Retry backoff and rate-limit waits on trio's MockClock: the default clock is anyio's time, so
the virtual clock drives every wait and the tests can read exactly when each attempt started."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from trio.testing import MockClock

from lionagi.protocols.messages import AssistantResponse, Instruction, Message
from lionagi.service.errors import RateLimitError, ServerError
from lionagi.service.retry import RetryPolicy
from lionagi.session.signal import ModelRetry, RunFailed
from lionagi.testing import FunctionModel
from tests.helpers import observed_branch

ASK: list[Message] = [Instruction(instruction="hi")]


def scheduled(outcomes: list[Exception | str], started: list[float]) -> Any:
    """A model function that fails or answers as scheduled, noting when each attempt began."""

    async def fn(messages: list[Message], **options: Any) -> str:
        started.append(trio.current_time())
        outcome = outcomes.pop(0)
        if outcome == "hang":
            await trio.sleep_forever()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return fn


async def test_backoff_follows_the_policy_and_retry_after(autojump_clock: MockClock) -> None:
    started: list[float] = []
    outcomes: list[Exception | str] = [
        RateLimitError("slow down", provider="function", retry_after=7.0),
        ServerError("down", provider="function", status=503),
        "hang",
        "answer",
    ]
    model = FunctionModel(
        scheduled(outcomes, started),
        retry=RetryPolicy(attempts=4, initial=1.0, jitter=0.0),
        timeout=30.0,
    )
    branch, recorder, _ = observed_branch(chat_model=model)
    begin = trio.current_time()

    assert await branch.chat_and_record("hello") == "answer"

    offsets = [round(t - begin, 6) for t in started]
    # Retry-After 7, then 1 * 2**1 = 2, then the 30 s timeout of the hang plus 1 * 2**2 = 4
    assert offsets == [0.0, 7.0, 9.0, 43.0]
    assert [type(m) for m in branch.msgs] == [Instruction, AssistantResponse]
    retries = [s for s in recorder.signals if isinstance(s, ModelRetry)]
    assert [r.wait for r in retries] == [7.0, 2.0, 4.0]
    assert [r.error.split(":")[0] for r in retries] == [
        "RateLimitError",
        "ServerError",
        "ProviderTimeout",
    ]


async def test_cancel_during_backoff_returns_at_once(autojump_clock: MockClock) -> None:
    started: list[float] = []
    outcomes: list[Exception | str] = [ServerError("down", provider="function", status=500), "x"]
    model = FunctionModel(
        scheduled(outcomes, started), retry=RetryPolicy(initial=100.0, jitter=0.0)
    )
    branch, recorder, _ = observed_branch(chat_model=model)
    begin = trio.current_time()

    with trio.move_on_after(5.0) as scope:
        await branch.chat_and_record("hello")

    assert scope.cancelled_caught
    assert trio.current_time() - begin == 5.0  # not the 100 s backoff
    assert len(started) == 1
    [terminal] = recorder.terminals()
    assert isinstance(terminal, RunFailed)
    assert isinstance(terminal.data, trio.Cancelled)


async def test_rate_limit_spaces_requests_by_the_interval(autojump_clock: MockClock) -> None:
    started: list[float] = []
    model = FunctionModel(
        scheduled(["a", "b", "c", "d", "e"], started), limit_requests=2, interval=10.0
    )
    begin = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(model.invoke, ASK)
            await trio.testing.wait_all_tasks_blocked()

    assert [round(t - begin, 6) for t in started] == [0.0, 0.0, 10.0, 10.0, 20.0]
