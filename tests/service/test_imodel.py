"""iModel: names, validation, secrets, serialization, copies, defaults, timeouts and limits."""

from __future__ import annotations

import inspect
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest
from pydantic import SecretStr

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import Instruction, Message
from lionagi.service.errors import AuthenticationError, ProviderTimeout, UnknownProviderError
from lionagi.service.imodel import iModel
from lionagi.service.providers import known_providers
from lionagi.service.types import FinalChunk, TextDelta
from lionagi.testing import FunctionModel
from tests.service.http_server import Reply, ScriptedServer

KEY = "sk-imodel-secret-4242"
ASK = [Instruction(instruction="hi")]


async def never(messages: list[Message], **options: Any) -> str:
    await anyio.Event().wait()
    raise AssertionError("unreachable")


async def completes_without_blocking(call: Callable[[], Awaitable[Any]]) -> list[Any]:
    """Run ``call`` in a task; once every task is blocked it must have finished.

    A call stuck on a leaked limiter token would be blocked, not finished -- no clock involved.
    """
    results: list[Any] = []

    async def run() -> None:
        results.append(await call())

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    return results


# -- names ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "kwargs", "provider", "model"),
    [
        (("openai/gpt-4o-mini",), {}, "openai", "gpt-4o-mini"),
        ((), {"model": "openai/gpt-4o-mini"}, "openai", "gpt-4o-mini"),
        (("openai", "gpt-4o-mini"), {}, "openai", "gpt-4o-mini"),
        (("openrouter", "openai/gpt-4o"), {}, "openrouter", "openai/gpt-4o"),
        (("openrouter/openai/gpt-4o",), {}, "openrouter", "openai/gpt-4o"),
        ((), {"model": "ollama/llama3.2:1b"}, "ollama", "llama3.2:1b"),
    ],
)
def test_provider_and_model_names_split(
    args: tuple[str, ...], kwargs: dict[str, Any], provider: str, model: str
) -> None:
    imodel = iModel(*args, api_key=KEY, **kwargs)
    assert (imodel.provider_name, imodel.model) == (provider, model)


def test_the_identity_attributes_are_the_providers_and_read_only() -> None:
    imodel = iModel("openai", "gpt-4o-mini", api_key=KEY)
    provider = imodel.provider
    assert (
        imodel.provider_name,
        imodel.model,
        imodel.supports_native_tools,
        imodel.structured_output,
    ) == (provider.name, provider.model, True, provider.structured_output)
    agent = FunctionModel(lambda messages, **options: "ok", name="fn", model="m1")
    assert (agent.provider_name, agent.model) == ("fn", "m1")
    with pytest.raises(AttributeError):
        imodel.model = "other"  # type: ignore[assignment]
    assert imodel.model == "gpt-4o-mini"


def test_missing_provider_or_model_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="needs a provider"):
        iModel()
    with pytest.raises(ConfigurationError, match="needs a model"):
        iModel("openai")


def test_unknown_provider_lists_known_names() -> None:
    with pytest.raises(UnknownProviderError) as info:
        iModel("openia", "gpt-4o-mini")
    message = str(info.value)
    assert "'openia'" in message
    for name in known_providers():
        assert name in message
    with pytest.raises(UnknownProviderError):
        iModel(model="nowhere/some-model")


# -- validation -----------------------------------------------------------------------------
@pytest.mark.parametrize("timeout", [0, -1, "5", math.nan, True, [1]])
def test_bad_timeout(timeout: Any) -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        iModel("openai", "gpt-4o-mini", api_key=KEY, timeout=timeout)


@pytest.mark.parametrize("limit", [0, -2, 1.5, "2", True])
def test_bad_concurrency_limit(limit: Any) -> None:
    with pytest.raises(ConfigurationError, match="concurrency_limit"):
        iModel("openai", "gpt-4o-mini", api_key=KEY, concurrency_limit=limit)
    with pytest.raises(ConfigurationError, match="concurrency_limit"):
        FunctionModel(lambda m, **o: "x", concurrency_limit=limit)


@pytest.mark.parametrize("base_url", ["not a url", "ftp://x", "http://", "localhost:8000/v1"])
def test_malformed_base_url(base_url: str) -> None:
    with pytest.raises(ConfigurationError, match="base_url") as info:
        iModel("openai", "gpt-4o-mini", api_key=KEY, base_url=base_url)
    assert repr(base_url) in str(info.value)
    assert KEY not in str(info.value)


def test_valid_settings_are_kept() -> None:
    imodel = iModel(
        "openai", "m", api_key=KEY, base_url="http://127.0.0.1:9/v1/", timeout=2.5,
        concurrency_limit=3,
    )  # fmt: skip
    assert imodel.provider.base_url == "http://127.0.0.1:9/v1"
    assert (imodel.timeout, imodel.concurrency_limit) == (2.5, 3)
    assert iModel("openai", "m", api_key=KEY, timeout=None).timeout is None


# -- secrets --------------------------------------------------------------------------------
def assert_hidden(imodel: iModel) -> None:
    for text in (repr(imodel), str(imodel), repr(imodel.provider), repr(imodel.to_dict())):
        assert KEY not in text


def test_api_key_from_argument_is_secret() -> None:
    imodel = iModel("openai", "gpt-4o-mini", api_key=KEY)
    assert isinstance(imodel.provider.api_key, SecretStr)
    assert imodel.provider.api_key.get_secret_value() == KEY
    assert_hidden(imodel)


def test_api_key_from_environment_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    imodel = iModel("openai", "gpt-4o-mini")
    assert isinstance(imodel.provider.api_key, SecretStr)
    assert imodel.provider.api_key.get_secret_value() == KEY
    assert_hidden(imodel)
    # An explicit key wins over the environment.
    assert iModel("openai", "m", api_key="other").provider.api_key == SecretStr("other")


def test_configuration_errors_do_not_show_the_key() -> None:
    for kwargs in ({"timeout": -1}, {"concurrency_limit": 0}, {"base_url": "ftp://x"}):
        with pytest.raises(ConfigurationError) as info:
            iModel("openai", "gpt-4o-mini", api_key=KEY, **kwargs)
        assert KEY not in str(info.value)
        assert KEY not in repr(info.value)


async def test_provider_errors_do_not_show_the_key() -> None:
    with ScriptedServer() as server:
        server.reply(Reply(status=401, json={"error": {"message": "bad credentials"}}))
        imodel = iModel("openai", "gpt-4o-mini", api_key=KEY, base_url=f"{server.url}/v1")
        with pytest.raises(AuthenticationError) as info:
            await imodel.invoke(ASK)
        await imodel.aclose()
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in str(info.value)
    assert KEY not in repr(info.value)


# -- serialization and copies ---------------------------------------------------------------
def test_to_dict_from_dict_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    imodel = iModel(
        "openai/gpt-4o-mini",
        api_key=KEY,
        base_url="http://127.0.0.1:9/v1",
        timeout=12.0,
        concurrency_limit=4,
        temperature=0.2,
        max_tokens=64,
    )
    data = imodel.to_dict()
    assert data == {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "timeout": 12.0,
        "concurrency_limit": 4,
        "provider_settings": {"base_url": "http://127.0.0.1:9/v1"},
        "request_defaults": {"temperature": 0.2, "max_tokens": 64},
    }
    assert KEY not in repr(data)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    again = iModel.from_dict(data)
    assert again.to_dict() == data
    assert type(again.provider) is type(imodel.provider)
    assert again.provider.api_key == SecretStr("sk-from-env")  # keys come from the environment


def test_round_trip_keeps_preset_providers() -> None:
    ollama = iModel("ollama", "llama3")
    again = iModel.from_dict(ollama.to_dict())
    assert (again.provider_name, again.model) == ("ollama", "llama3")
    assert again.provider.base_url == "http://localhost:11434/v1"
    assert again.provider.api_key is None


def test_from_dict_needs_provider_and_model() -> None:
    with pytest.raises(ConfigurationError, match="'model'"):
        iModel.from_dict({"provider": "openai"})


def test_copy_is_independent() -> None:
    imodel = iModel("openai", "gpt-4o-mini", api_key=KEY, timeout=7.0, temperature=0.3)
    twin = imodel.copy()
    assert twin.provider is not imodel.provider
    assert twin.to_dict() == imodel.to_dict()
    assert twin.provider.api_key == imodel.provider.api_key
    twin.request_defaults["temperature"] = 1.0
    assert imodel.request_defaults == {"temperature": 0.3}


async def test_copy_has_its_own_limiter() -> None:
    entered = anyio.Event()
    release = anyio.Event()

    async def hold(messages: list[Message], **options: Any) -> str:
        if not entered.is_set():
            entered.set()
            await release.wait()
        return "done"

    model = FunctionModel(hold, concurrency_limit=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(model.invoke, ASK)
        await entered.wait()  # the original's only token is taken
        twin = model.copy()
        assert await completes_without_blocking(lambda: twin.invoke(ASK))
        release.set()


# -- calls ----------------------------------------------------------------------------------
async def test_request_defaults_merge_with_call_options() -> None:
    seen: list[dict[str, Any]] = []

    def fn(messages: list[Message], **options: Any) -> str:
        seen.append(options)
        return "ok"

    model = FunctionModel(fn, temperature=0.2, top_p=0.9)
    await model.invoke(ASK, temperature=0.7, seed=1)
    await model.invoke(ASK)
    assert seen == [
        {"temperature": 0.7, "top_p": 0.9, "seed": 1},
        {"temperature": 0.2, "top_p": 0.9},
    ]
    assert model.request_defaults == {"temperature": 0.2, "top_p": 0.9}
    assert model.calls[0].options == seen[0]
    request = iModel("openai", "m", api_key=KEY, temperature=0.2).request(ASK, max_tokens=5)
    assert request.options == {"temperature": 0.2, "max_tokens": 5}


async def test_timeout_raises_provider_timeout() -> None:
    hangs = [False, True]

    async def first_hangs(messages: list[Message], **options: Any) -> str:
        if hangs.pop():
            await anyio.Event().wait()
        return "next"

    model = FunctionModel(
        first_hangs, name="slow", model="m", timeout=0.05, concurrency_limit=1, retry=None
    )
    with pytest.raises(ProviderTimeout) as info:
        await model.invoke(ASK)
    assert isinstance(info.value, TimeoutError)
    assert (info.value.provider, info.value.model) == ("slow", "m")
    assert "0.05" in str(info.value)
    # The timed-out call gave its token back.
    done = await completes_without_blocking(lambda: model.invoke(ASK))
    assert [r.text for r in done] == ["next"]


async def test_stream_timeout_raises_provider_timeout() -> None:
    async def stall(messages: list[Message], **options: Any) -> AsyncIterator[str]:
        yield "first"
        await anyio.Event().wait()
        yield "never"

    model = FunctionModel(never, stream=stall, timeout=0.05)
    stream = model.stream(ASK)
    assert await stream.__anext__() == TextDelta(text="first")
    with pytest.raises(ProviderTimeout, match="stream"):
        await stream.__anext__()


async def test_fn_errors_release_the_limiter() -> None:
    fails = [False, True]

    def flaky(messages: list[Message], **options: Any) -> str:
        if fails.pop():
            raise RuntimeError("boom")
        return "fine"

    model = FunctionModel(flaky, concurrency_limit=1)
    with pytest.raises(RuntimeError, match="boom"):
        await model.invoke(ASK)
    assert await completes_without_blocking(lambda: model.invoke(ASK))


async def test_concurrency_limit_caps_calls_in_flight() -> None:
    inside = 0
    peak = 0
    gates: list[anyio.Event] = []

    async def fn(messages: list[Message], **options: Any) -> str:
        nonlocal inside, peak
        inside += 1
        peak = max(peak, inside)
        gate = anyio.Event()
        gates.append(gate)
        try:
            await gate.wait()
        finally:
            inside -= 1
        return "done"

    model = FunctionModel(fn, concurrency_limit=2)
    results: list[str] = []

    async def call() -> None:
        results.append((await model.invoke(ASK)).text)

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(call)
        for released in range(5):
            await anyio.wait_all_tasks_blocked()
            assert inside == min(2, 5 - released)
            assert len(gates) == released + inside
            gates[released].set()
    assert peak == 2
    assert results == ["done"] * 5


async def test_stream_aclose_runs_provider_finally_and_releases_token() -> None:
    closed: list[str] = []

    def chunks(messages: list[Message], **options: Any) -> Iterator[str]:
        try:
            yield from ("a", "b", "c")
        finally:
            closed.append("generator")

    model = FunctionModel(lambda m, **o: "after", stream=chunks, concurrency_limit=1)
    stream = model.stream(ASK)
    assert await stream.__anext__() == TextDelta(text="a")
    await stream.aclose()
    assert closed == ["generator"]
    assert [r.text for r in await completes_without_blocking(lambda: model.invoke(ASK))] == [
        "after"
    ]


async def test_stream_ends_with_final_chunk() -> None:
    model = FunctionModel(lambda m, **o: "whole")
    chunks = [chunk async for chunk in model.stream(ASK)]
    assert isinstance(chunks[-1], FinalChunk)
    assert chunks[-1].response.text == "whole"


def test_same_model_on_asyncio_then_trio() -> None:
    inside = 0
    peak = 0

    async def fn(messages: list[Message], **options: Any) -> str:
        nonlocal inside, peak
        inside += 1
        peak = max(peak, inside)
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        inside -= 1
        return "ok"

    model = FunctionModel(fn, concurrency_limit=1)

    async def burst() -> list[str]:
        results: list[str] = []

        async def one() -> None:
            results.append((await model.invoke(ASK)).text)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one)
        chunks = [chunk async for chunk in model.stream(ASK)]
        assert isinstance(chunks[-1], FinalChunk)
        return results

    assert anyio.run(burst, backend="asyncio") == ["ok"] * 3
    assert anyio.run(burst, backend="trio") == ["ok"] * 3
    assert anyio.run(burst, backend="asyncio") == ["ok"] * 3
    assert peak == 1


async def test_stream_is_declared_with_invokes_parameters() -> None:
    declared = inspect.signature(iModel.stream)
    assert declared.parameters == inspect.signature(iModel.invoke).parameters
    model = FunctionModel(lambda messages, **options: "hi there")
    with pytest.raises(TypeError, match="positional arguments"):
        model.stream(ASK, ())  # type: ignore[call-arg]
    stream = model.stream(ASK, tools=(), session_id="s", on_retry=None, temperature=0.5)
    chunks = [chunk async for chunk in stream]
    assert isinstance(chunks[-1], FinalChunk)
    assert chunks[-1].response.text == "hi there"
