"""``await model.embed(texts)`` against a local OpenAI-compatible server, on both backends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import Usage
from lionagi.service.embeddings import Embeddings
from lionagi.service.errors import AuthenticationError, ProtocolError, ProviderTimeout
from lionagi.service.imodel import iModel
from lionagi.service.retry import RetryPolicy
from tests.service.http_server import Received, Reply, ScriptedServer

pytestmark = pytest.mark.anyio

KEY = "sk-embed-secret-7"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


class EchoingEmbedder(ScriptedServer):
    """Answers each request with vectors derived from its own texts (``"t3"`` -> ``(3.0,)``),
    so batches sent concurrently, in any order, can be checked against their inputs."""

    def __init__(self) -> None:
        super().__init__()
        self._current = threading.local()

    def record(self, received: Received) -> None:
        super().record(received)
        self._current.received = received

    def next_reply(self) -> Reply:
        texts = self._current.received.json["input"]
        return answer([[float(t[1:])] for t in texts], tokens=len(texts))


def model_for(server: ScriptedServer, provider: str = "openai", **kw: Any) -> iModel:
    options: dict[str, Any] = {"api_key": KEY, "timeout": 10.0, "retry": None, **kw}
    return iModel(provider, "text-embedding-3-small", base_url=f"{server.url}/v1", **options)


def answer(vectors: list[list[float]], *, tokens: int = 5, shuffle: bool = False) -> Reply:
    rows = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    if shuffle:
        rows.reverse()
    return Reply(
        json={
            "object": "list",
            "data": rows,
            "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


async def test_embed_returns_typed_vectors_in_order(server: ScriptedServer) -> None:
    server.reply(answer([[0.1, 0.2], [0.3, 0.4]], shuffle=True))
    model = model_for(server)
    result = await model.embed(["first", "second"], dimensions=2)
    await model.aclose()
    assert isinstance(result, Embeddings)
    assert result.vectors == ((0.1, 0.2), (0.3, 0.4))
    assert len(result) == 2
    assert result[1] == (0.3, 0.4)
    assert list(result) == [(0.1, 0.2), (0.3, 0.4)]
    assert result.dimensions == 2
    assert (result.model, result.provider) == ("text-embedding-3-small", "openai")
    assert result.usage == Usage(input_tokens=5)
    [request] = server.requests
    assert request.path == "/v1/embeddings"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json == {
        "model": "text-embedding-3-small",
        "input": ["first", "second"],
        "dimensions": 2,
    }


async def test_long_input_goes_in_batches_and_joins_in_order() -> None:
    texts = [f"t{i}" for i in range(11)]
    with EchoingEmbedder() as server:
        model = model_for(server)
        result = await model.embed(texts, batch_size=3)
        await model.aclose()
    asked = sorted(tuple(r.json["input"]) for r in server.requests)
    assert asked == sorted(tuple(texts[i : i + 3]) for i in range(0, 11, 3))
    assert result.vectors == tuple((float(i),) for i in range(11))
    assert result.usage.input_tokens == 11


async def test_one_string_and_empty_input(server: ScriptedServer) -> None:
    server.reply(answer([[1.0, 0.0]]))
    model = model_for(server)
    assert (await model.embed("alone")).vectors == ((1.0, 0.0),)
    assert server.requests[0].json["input"] == ["alone"]
    empty = await model.embed([])
    assert len(empty) == 0
    assert empty.dimensions is None
    assert len(server.requests) == 1
    await model.aclose()


async def test_presets_and_custom_servers_embed(server: ScriptedServer) -> None:
    server.reply(answer([[0.5]]), answer([[0.25]]))
    preset, custom = model_for(server, "mistral"), model_for(server, "my_embedder")
    assert (await preset.embed(["x"])).provider == "mistral"
    assert (await custom.embed(["y"])).vectors == ((0.25,),)
    await preset.aclose()
    await custom.aclose()


async def test_errors_are_typed(server: ScriptedServer) -> None:
    model = model_for(server)
    server.reply(Reply(status=401, json={"error": {"message": "bad key"}}))
    with pytest.raises(AuthenticationError):
        await model.embed(["x"])
    server.reply(answer([[0.1]]))
    with pytest.raises(ProtocolError, match="asked for 2 embeddings"):
        await model.embed(["x", "y"])
    server.reply(Reply(json={"data": [{"index": 0, "embedding": "AAAA"}]}))
    with pytest.raises(ProtocolError, match="base64"):
        await model.embed(["x"])
    with pytest.raises(ConfigurationError, match="list of strings"):
        await model.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="batch_size"):
        await model.embed(["ok"], batch_size=0)
    await model.aclose()


async def test_a_failed_batch_is_retried_under_the_policy(server: ScriptedServer) -> None:
    server.reply(Reply(status=503, json={"error": {"message": "busy"}}), answer([[0.5]]))
    model = model_for(server, retry=RetryPolicy(attempts=2, initial=0.01, jitter=0.0))
    result = await model.embed(["x"])
    await model.aclose()
    assert result.vectors == ((0.5,),)
    assert len(server.requests) == 2


async def test_timeout_bounds_the_whole_call(server: ScriptedServer) -> None:
    server.reply(Reply(hang=True))
    model = model_for(server, timeout=0.3)
    with pytest.raises(ProviderTimeout, match="no embeddings within"):
        await model.embed(["x"])
    await model.aclose()


async def test_cancel_stops_the_batches(server: ScriptedServer) -> None:
    server.reply(Reply(hang=True), Reply(hang=True))
    model = model_for(server, timeout=None)
    with anyio.move_on_after(0.3) as scope:
        await model.embed(["a", "b"], batch_size=1)
    assert scope.cancelled_caught
    await model.aclose()


async def test_providers_without_embeddings_say_so() -> None:
    model = iModel("anthropic", "claude-x", api_key=KEY)
    with pytest.raises(ConfigurationError, match="does not offer embeddings"):
        await model.embed(["x"])
