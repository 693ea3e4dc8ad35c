"""Fallback models: the next model answers when one fails for good with a retryable error."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import AssistantResponse, Instruction, Message
from lionagi.service.errors import AuthenticationError, RateLimitError, ServerError
from lionagi.session.signal import RunEnd
from lionagi.testing import FunctionModel, VirtualClock
from tests.helpers import observed_branch

ASK: list[Message] = [Instruction(instruction="hi")]


def failing(error: Exception, calls: list[str], name: str) -> FunctionModel:
    def fn(messages: list[Message], **options: Any) -> str:
        calls.append(name)
        raise error

    return FunctionModel(fn, name=name, model=f"{name}-model", retry=None)


def answering(calls: list[str], name: str) -> FunctionModel:
    def fn(messages: list[Message], **options: Any) -> str:
        calls.append(name)
        return f"from {name}"

    return FunctionModel(fn, name=name, model=f"{name}-model", retry=None)


async def test_the_next_model_answers_and_is_recorded_as_the_one_used() -> None:
    calls: list[str] = []
    primary = failing(ServerError("down", provider="a", status=500), calls, "a")
    second = failing(RateLimitError("busy", provider="b"), calls, "b")
    third = answering(calls, "c")
    primary.fallback = (second, third)
    branch, recorder, _ = observed_branch(chat_model=primary)

    assert await branch.chat_and_record("hello") == "from c"

    assert calls == ["a", "b", "c"]
    reply = branch.msgs[-1]
    assert isinstance(reply, AssistantResponse)
    assert reply.model == "c-model"
    [end] = recorder.terminals()
    assert isinstance(end, RunEnd)


async def test_fallback_comes_after_the_primary_retries() -> None:
    calls: list[str] = []
    clock = VirtualClock()

    def down(messages: list[Message], **options: Any) -> str:
        calls.append("primary")
        raise ServerError("down", provider="p", status=503)

    backup = answering(calls, "backup")
    primary = FunctionModel(down, fallback=[backup], clock=clock)

    response = await primary.invoke(ASK)

    assert (response.text, response.provider, response.model) == (
        "from backup",
        "backup",
        "backup-model",
    )
    assert calls == ["primary", "primary", "primary", "backup"]
    assert len(clock.sleeps) == 2


async def test_errors_not_worth_a_retry_do_not_fall_back() -> None:
    calls: list[str] = []
    primary = failing(AuthenticationError("bad key", provider="a", status=401), calls, "a")
    primary.fallback = (answering(calls, "b"),)
    with pytest.raises(AuthenticationError):
        await primary.invoke(ASK)
    assert calls == ["a"]


async def test_listed_errors_fall_back_and_the_last_failure_names_the_earlier() -> None:
    calls: list[str] = []

    def refuse(messages: list[Message], **options: Any) -> str:
        calls.append("a")
        raise ValueError("content filter")

    second = failing(ServerError("down", provider="b", status=500), calls, "b")
    primary = FunctionModel(refuse, retry=None, fallback=[second], fallback_on=(ValueError,))
    with pytest.raises(ServerError) as caught:
        await primary.invoke(ASK)
    assert calls == ["a", "b"]
    assert any("ValueError: content filter" in note for note in caught.value.__notes__)


async def test_cancellation_never_falls_back() -> None:
    calls: list[str] = []
    started = anyio.Event()

    async def hang(messages: list[Message], **options: Any) -> str:
        calls.append("a")
        started.set()
        await anyio.Event().wait()
        return "never"

    primary = FunctionModel(hang, retry=None, fallback=[answering(calls, "b")])
    async with anyio.create_task_group() as tg:
        tg.start_soon(primary.invoke, ASK)
        await started.wait()
        tg.cancel_scope.cancel()
    assert calls == ["a"]


def test_fallback_settings_are_checked() -> None:
    model = FunctionModel(lambda m, **o: "x")
    with pytest.raises(ConfigurationError, match="list of iModel"):
        FunctionModel(lambda m, **o: "x", fallback=model)
    with pytest.raises(ConfigurationError, match="iModel objects"):
        FunctionModel(lambda m, **o: "x", fallback=["gpt-4o"])
    with pytest.raises(ConfigurationError, match="fallback_on"):
        FunctionModel(lambda m, **o: "x", fallback=[model], fallback_on=(int,))
    copy = FunctionModel(lambda m, **o: "x", fallback=[model]).copy()
    assert len(copy.fallback) == 1
    assert copy.fallback[0] is not model
