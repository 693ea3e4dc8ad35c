"""Retries as a model policy, against a local HTTP server failing on a schedule.

Backoff waits run on a VirtualClock, so no test here sleeps; the waits asked for are checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import AssistantResponse, Instruction, Message
from lionagi.service.errors import (
    AuthenticationError,
    BadRequestError,
    ProtocolError,
    ProviderConnectionError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
)
from lionagi.service.imodel import iModel
from lionagi.service.retry import DEFAULT_RETRY, RetryPolicy
from lionagi.service.types import FinalChunk
from lionagi.session.signal import ModelRetry, RunEnd, RunFailed
from lionagi.testing import FunctionModel, VirtualClock
from tests.helpers import observed_branch
from tests.service.http_server import Reply, ScriptedServer, sse

KEY = "sk-test-retry"
NO_JITTER = RetryPolicy(attempts=6, jitter=0.0)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def completion(text: str) -> Reply:
    message = {"role": "assistant", "content": text}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    usage = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    return Reply(json={"id": "1", "model": "gpt-test", "choices": [choice], "usage": usage})


def failure(status: int, **headers: str) -> Reply:
    return Reply(status=status, json={"error": {"message": f"status {status}"}}, headers=headers)


def http_model(server: ScriptedServer, clock: VirtualClock, **kwargs: Any) -> iModel:
    kwargs.setdefault("retry", NO_JITTER)
    kwargs.setdefault("timeout", 10.0)
    return iModel(
        "openai", "gpt-test", base_url=f"{server.url}/v1", api_key=KEY, clock=clock, **kwargs
    )


ASK: list[Message] = [Instruction(instruction="hi")]


async def test_schedule_of_failures_is_retried_to_success(server: ScriptedServer) -> None:
    server.reply(
        failure(429, **{"retry-after": "2"}),
        failure(429),
        failure(500),
        failure(503),
        Reply(reset=True),
        completion("finally"),
    )
    clock = VirtualClock()
    model = http_model(server, clock)

    response = await model.invoke(ASK)

    assert response.text == "finally"
    assert response.attempts == 6
    assert len(server.requests) == 6
    # Retry-After is waited exactly; the others back off 0.5 * 2**(n-1), capped at 8
    assert clock.sleeps == [2.0, 1.0, 2.0, 4.0, 8.0]
    await model.aclose()


async def test_turn_records_one_instruction_and_reports_every_attempt(
    server: ScriptedServer,
) -> None:
    server.reply(failure(429, **{"retry-after": "0.25"}), failure(502), completion("ok"))
    clock = VirtualClock()
    model = http_model(server, clock)
    branch, recorder, _ = observed_branch(chat_model=model)

    assert await branch.chat_and_record("hello") == "ok"

    kinds = [type(m) for m in branch.msgs]
    assert kinds == [Instruction, AssistantResponse]
    retries = [s for s in recorder.signals if isinstance(s, ModelRetry)]
    assert [(r.attempt, r.wait, r.status) for r in retries] == [(1, 0.25, 429), (2, 1.0, 502)]
    assert all(r.turn_id == recorder.starts()[0].turn_id for r in retries)
    assert retries[0].error.startswith("RateLimitError: ")
    [end] = recorder.terminals()
    assert isinstance(end, RunEnd)
    assert (end.num_turns, end.attempts) == (1, 3)
    assert KEY not in " ".join(r.error for r in retries)
    await model.aclose()


@pytest.mark.parametrize(
    ("reply", "error_type"),
    [
        (failure(400), BadRequestError),
        (failure(401), AuthenticationError),
        (Reply(body=b"<html>oops</html>", headers={"content-type": "text/html"}), ProtocolError),
    ],
    ids=["400", "401", "unreadable"],
)
async def test_non_retryable_errors_are_raised_at_once(
    server: ScriptedServer, reply: Reply, error_type: type[Exception]
) -> None:
    server.reply(reply, completion("never asked for"))
    clock = VirtualClock()
    model = http_model(server, clock)

    with pytest.raises(error_type):
        await model.invoke(ASK)

    assert len(server.requests) == 1
    assert clock.sleeps == []
    await model.aclose()


async def test_attempts_run_out_and_the_last_error_is_raised(server: ScriptedServer) -> None:
    server.reply(failure(500), failure(503), failure(500))
    clock = VirtualClock()
    model = http_model(server, clock, retry=RetryPolicy(attempts=3, jitter=0.0))

    with pytest.raises(ServerError) as caught:
        await model.invoke(ASK)

    assert caught.value.status == 500
    assert len(server.requests) == 3
    assert clock.sleeps == [0.5, 1.0]
    await model.aclose()


async def test_a_hang_times_out_and_is_retried(server: ScriptedServer) -> None:
    server.reply(completion("warm"), Reply(hang=True), completion("second try"))
    clock = VirtualClock()
    model = http_model(server, clock, timeout=0.5)
    await model.invoke(ASK)  # the first call also builds the HTTP client; keep it out of the hang

    response = await model.invoke(ASK)

    assert response.text == "second try"
    assert response.attempts == 2
    assert len(server.requests) == 3
    assert clock.sleeps == [0.5]
    await model.aclose()


async def test_a_retry_after_beyond_the_policy_limit_is_raised(server: ScriptedServer) -> None:
    server.reply(failure(429, **{"retry-after": "3600"}), completion("too late"))
    clock = VirtualClock()
    model = http_model(server, clock)

    with pytest.raises(RateLimitError) as caught:
        await model.invoke(ASK)

    assert caught.value.retry_after == 3600
    assert len(server.requests) == 1
    await model.aclose()


async def test_stream_is_reopened_until_its_first_chunk(server: ScriptedServer) -> None:
    delta = {"id": "1", "choices": [{"index": 0, "delta": {"content": "streamed"}}]}
    done = {"id": "1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    server.reply(
        failure(429),
        Reply(reset=True),
        Reply(events=[sse(delta), sse(done), sse("[DONE]")]),
    )
    clock = VirtualClock()
    model = http_model(server, clock)

    chunks = [chunk async for chunk in model.stream(ASK)]

    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert final.response.text == "streamed"
    assert final.response.attempts == 3
    assert clock.sleeps == [0.5, 1.0]
    await model.aclose()


class StuckClock(VirtualClock):
    """A clock whose sleeps never end: ``sleeping`` is set when a backoff wait begins."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeping = anyio.Event()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.sleeping.set()
        await anyio.Event().wait()


async def test_cancellation_during_backoff_returns_at_once_with_one_run_failed(
    server: ScriptedServer,
) -> None:
    server.reply(failure(503), completion("never sent"))
    clock = StuckClock()
    model = http_model(server, clock)
    branch, recorder, _ = observed_branch(chat_model=model)

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(branch.chat_and_record, "hello")
            await clock.sleeping.wait()
            scope.cancel()

    assert scope.cancelled_caught
    assert len(server.requests) == 1
    assert clock.sleeps == [0.5]
    [terminal] = recorder.terminals()
    assert isinstance(terminal, RunFailed)
    assert isinstance(terminal.data, anyio.get_cancelled_exc_class())
    await model.aclose()


def test_agentic_cli_requests_retry_only_what_was_not_taken() -> None:
    policy = RetryPolicy()
    assert policy.retryable(RateLimitError("slow down", provider="p"), idempotent=False)
    assert policy.retryable(ProviderConnectionError("reset", provider="p"), idempotent=False)
    assert not policy.retryable(ServerError("exit 1", provider="p"), idempotent=False)
    assert not policy.retryable(ProviderTimeout("late", provider="p"), idempotent=False)
    assert policy.retryable(ServerError("exit 1", provider="p"), idempotent=True)
    assert not policy.retryable(KeyboardInterrupt(), idempotent=True)


async def test_retry_can_be_turned_off_and_the_default_is_a_policy() -> None:
    calls: list[int] = []

    def flaky(messages: list[Message], **options: Any) -> str:
        calls.append(1)
        raise ServerError("down", provider="function", status=500)

    assert FunctionModel(flaky).retry is DEFAULT_RETRY
    model = FunctionModel(flaky, retry=None)
    with pytest.raises(ServerError):
        await model.invoke(ASK)
    assert calls == [1]


async def test_own_exception_types_can_be_retried() -> None:
    class Flaky(Exception):
        pass

    outcomes: list[Exception | str] = [Flaky("once"), "ok"]

    def fn(messages: list[Message], **options: Any) -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    clock = VirtualClock()
    model = FunctionModel(fn, retry=RetryPolicy(retry_on=(Flaky,), jitter=0.0), clock=clock)
    assert (await model.invoke(ASK)).text == "ok"
    assert clock.sleeps == [0.5]


def test_jitter_stays_within_its_bound() -> None:
    policy = RetryPolicy(initial=1.0, jitter=0.5)
    waits = [policy.backoff(1, None) for _ in range(200)]
    assert all(1.0 <= w <= 1.5 for w in waits)
    assert len(set(waits)) > 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attempts": 0},
        {"attempts": 2.5},
        {"initial": -1},
        {"jitter": float("nan")},
        {"exp_base": 0.5},
        {"exp_base": True},
        {"max_wait": float("inf")},
        {"retry_on": (int,)},
    ],
)
def test_bad_policies_are_rejected(kwargs: dict[str, Any]) -> None:
    ((name, value),) = kwargs.items()
    message = rf"RetryPolicy\.{name} must be .*, got {re.escape(repr(value))}"
    with pytest.raises(ConfigurationError, match=message):
        RetryPolicy(**kwargs)


def test_every_numeric_setting_round_trips_and_unknown_ones_are_named() -> None:
    policy = RetryPolicy(
        attempts=4, initial=0.25, max_wait=3.0, exp_base=3.0, jitter=0.0, max_retry_after=9.0
    )
    assert policy.to_dict() == {
        "attempts": 4,
        "initial": 0.25,
        "max_wait": 3.0,
        "exp_base": 3.0,
        "jitter": 0.0,
        "max_retry_after": 9.0,
    }
    assert RetryPolicy.from_dict(policy.to_dict()) == policy
    with pytest.raises(ConfigurationError, match=r"unknown settings \['retry_on'\]"):
        RetryPolicy.from_dict({"retry_on": ()})


def test_retry_argument_is_checked_and_round_trips() -> None:
    with pytest.raises(ConfigurationError, match=r"RetryPolicy\(attempts=3\)"):
        iModel("openai", "m", api_key=KEY, retry=3)  # type: ignore[arg-type]
    policy = RetryPolicy(attempts=5, initial=0.1)
    model = iModel("openai", "m", api_key=KEY, retry=policy, limit_requests=10, interval=1.0)
    data = model.to_dict()
    assert data["retry"]["attempts"] == 5
    again = iModel.from_dict(data)
    assert again.retry == policy
    assert (again.limit_requests, again.interval) == (10, 1.0)
    assert iModel.from_dict(iModel("openai", "m", api_key=KEY, retry=None).to_dict()).retry is None
    assert model.copy().retry == policy


@pytest.mark.parametrize("fails", [0, 1], ids=["first-attempt", "after-a-retry"])
async def test_a_guarded_retry_wraps_its_clock_and_hook_only_once_it_retries(
    fails: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``call_with_retry(guarded_by=interrupt)`` (a stream turn's): a call that succeeds at once
    makes no guarded clock or hook; once it retries, its backoff wait and its retry hook run as
    guarded waits of the interrupt."""
    from lionagi import _interrupt
    from lionagi.service import retry as retry_module
    from lionagi.service.retry import call_with_retry

    made: list[str] = []
    guarded_clock, guarded_hook = _interrupt.GuardedClock, _interrupt.guarded_hook

    def counted_clock(*args: Any) -> Any:
        made.append("clock")
        return guarded_clock(*args)

    def counted_hook(*args: Any) -> Any:
        made.append("hook")
        return guarded_hook(*args)

    monkeypatch.setattr(retry_module, "GuardedClock", counted_clock)
    monkeypatch.setattr(retry_module, "guarded_hook", counted_hook)
    interrupt = _interrupt.Interrupt()
    clock = VirtualClock()
    left = [fails]
    told: list[int] = []

    async def attempt() -> str:
        if left[0]:
            left[0] -= 1
            raise ServerError("busy", provider="test", status=503)
        return "ok"

    result = await call_with_retry(
        RetryPolicy(attempts=3, jitter=0.0),
        attempt,
        clock=clock,
        on_retry=lambda record: told.append(record.attempt),
        guarded_by=interrupt,
    )
    assert result == ("ok", fails + 1)
    assert made == (["clock", "hook"] if fails else [])
    assert told == list(range(1, fails + 1))
