"""HTTP transport of the providers: one SSL context, clients per loop, limits, hooks, close."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import Instruction
from lionagi.service.imodel import iModel
from lionagi.service.providers import _http
from tests.service.http_server import Reply, ScriptedServer

ASK = [Instruction(instruction="x")]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def answer(text: str = "ok") -> Reply:
    message = {"role": "assistant", "content": text}
    return Reply(json={"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})


def model_for(server: ScriptedServer, **kw: Any) -> iModel:
    return iModel(
        "openai", "m", base_url=f"{server.url}/v1", api_key="sk-x", timeout=20, retry=None, **kw
    )


def test_one_ssl_context_serves_every_model_and_event_loop(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[ssl.SSLContext] = []
    real = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        context = real(*args, **kwargs)
        made.append(context)
        return context

    monkeypatch.setattr(ssl, "create_default_context", counting)
    _http.shared_ssl_context.cache_clear()
    models = [model_for(server), model_for(server)]
    server.reply(*(answer() for _ in range(4)))

    async def use() -> None:
        for model in models:
            assert (await model.invoke(ASK)).text == "ok"
            await model.aclose()

    anyio.run(use, backend="asyncio")
    anyio.run(use, backend="trio")

    assert len(made) == 1  # not one per client: two models in two event loops
    _http.shared_ssl_context.cache_clear()


@pytest.mark.anyio
async def test_a_model_reuses_its_client_within_a_loop(server: ScriptedServer) -> None:
    server.reply(answer(), answer())
    async with model_for(server) as model:
        await model.invoke(ASK)
        first = model.provider._client()  # type: ignore[attr-defined]
        await model.invoke(ASK)
        assert model.provider._client() is first  # type: ignore[attr-defined]
    assert first.is_closed  # async with closed it


@pytest.mark.anyio
async def test_connection_limits_and_a_client_hook(server: ScriptedServer) -> None:
    seen: list[str] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request.url.path)

    made: list[httpx.AsyncClient] = []

    def client() -> httpx.AsyncClient:
        made.append(httpx.AsyncClient(event_hooks={"request": [record]}))
        return made[-1]

    server.reply(answer("hooked"))
    limits = httpx.Limits(max_connections=3, max_keepalive_connections=1)
    async with model_for(server, http_client=client) as hooked:
        assert (await hooked.invoke(ASK)).text == "hooked"
    assert seen == ["/v1/chat/completions"]
    assert len(made) == 1
    assert made[0].is_closed

    limited = model_for(server, limits=limits)
    assert limited.provider.limits is limits  # type: ignore[attr-defined]
    assert "limits" not in limited.to_dict()["provider_settings"]
    with pytest.raises(ConfigurationError, match=r"limits must be an httpx\.Limits"):
        model_for(server, limits=3)
    with pytest.raises(ConfigurationError, match="http_client must be a function"):
        model_for(server, http_client=httpx.AsyncClient())
