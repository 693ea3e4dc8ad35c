"""Provider presets for OpenAI-compatible services, custom names with a base_url, the default
provider of a bare model name: against a local server, stream and not, on both backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from lionagi.protocols.messages import Instruction
from lionagi.service.errors import UnknownProviderError
from lionagi.service.imodel import iModel
from lionagi.service.providers import known_providers
from lionagi.service.providers._presets import OPENAI_COMPATIBLE
from lionagi.service.types import FinalChunk, TextDelta
from tests.payloads import DONE, USAGE_EVENT, chunk, completion
from tests.service.http_server import Reply, ScriptedServer

pytestmark = pytest.mark.anyio

KEY = "sk-preset-secret-42"
ASK = [Instruction(instruction="Say hi.")]
PRESETS = sorted(OPENAI_COMPATIBLE)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def test_every_preset_is_registered() -> None:
    assert set(PRESETS) == {
        "gemini",
        "deepseek",
        "perplexity",
        "nvidia_nim",
        "mistral",
        "xai",
        "together",
        "fireworks",
    }
    assert set(PRESETS) <= set(known_providers())


@pytest.mark.parametrize("name", PRESETS)
def test_preset_reads_its_key_variable_and_url(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    preset = OPENAI_COMPATIBLE[name]
    assert preset.api_key_env is not None
    monkeypatch.setenv(preset.api_key_env, KEY)
    model = iModel(name, "some-model")
    assert model.provider_name == name
    assert model.provider.base_url == preset.base_url
    assert model.provider.api_key is not None
    assert model.provider.api_key.get_secret_value() == KEY
    assert KEY not in repr(model)
    assert KEY not in json.dumps(model.to_dict())
    again = iModel.from_dict(model.to_dict())
    assert (again.provider_name, again.model) == (name, "some-model")
    assert again.provider.base_url == preset.base_url


@pytest.mark.parametrize("name", PRESETS)
async def test_preset_speaks_chat_completions(name: str, server: ScriptedServer) -> None:
    model = iModel(name, "m-1", api_key=KEY, base_url=f"{server.url}/v1", timeout=10)
    server.reply(Reply(json=completion({"role": "assistant", "content": f"hi from {name}"})))
    server.reply(
        Reply(
            events=[chunk({"role": "assistant", "content": "hi "}), chunk({"content": name}), DONE]
        )
    )
    response = await model.invoke(ASK)
    assert response.text == f"hi from {name}"
    assert response.provider == name
    chunks = [c async for c in model.stream(ASK)]
    await model.aclose()
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["hi ", name]
    assert isinstance(chunks[-1], FinalChunk)
    assert chunks[-1].response.text == f"hi {name}"
    first, second = server.requests
    assert first.path == second.path == "/v1/chat/completions"
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.json["model"] == "m-1"
    assert second.json["stream"] is True


def test_bare_model_name_uses_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = iModel(model="gpt-4o")
    assert (model.provider_name, model.model) == ("openai", "gpt-4o")
    assert model.provider.base_url == "https://api.openai.com/v1"


async def test_unknown_name_with_base_url_is_openai_compatible(server: ScriptedServer) -> None:
    model = iModel(
        provider="my_provider", model="local-7b", base_url=f"{server.url}/v1", api_key=KEY
    )
    assert model.provider_name == "my_provider"
    server.reply(Reply(json=completion({"role": "assistant", "content": "custom"})))
    server.reply(Reply(events=[chunk({"content": "stre"}), chunk({"content": "amed"}), DONE]))
    response = await model.invoke(ASK)
    assert (response.text, response.provider) == ("custom", "my_provider")
    final = [c async for c in model.stream(ASK)][-1]
    await model.aclose()
    assert isinstance(final, FinalChunk)
    assert final.response.text == "streamed"
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    rebuilt = iModel.from_dict(model.to_dict())
    assert (rebuilt.provider_name, rebuilt.provider.base_url) == (
        "my_provider",
        f"{server.url}/v1",
    )


async def test_custom_provider_without_key_sends_no_authorization(server: ScriptedServer) -> None:
    model = iModel("lab_server", "m", base_url=f"{server.url}/v1")
    server.reply(Reply(events=[chunk({"content": "ok"}), USAGE_EVENT, DONE]))
    final = [c async for c in model.stream(ASK)][-1]
    await model.aclose()
    assert isinstance(final, FinalChunk)
    assert final.response.usage.input_tokens > 0
    assert "authorization" not in server.requests[0].headers


def test_unknown_name_without_base_url_says_what_to_do() -> None:
    with pytest.raises(UnknownProviderError, match="pass its base_url"):
        iModel("my_provider", "m")


def test_the_providers_guide_lists_every_provider() -> None:
    guide = (Path(__file__).parents[2] / "docs" / "guides" / "providers.md").read_text()
    table = guide.split("## Every provider at a glance", 1)[1].split("\n## ", 1)[0]
    listed = {
        row.split("|")[1].strip().strip("`") for row in table.splitlines() if row.startswith("| `")
    }
    assert set(known_providers()) <= listed
    for name, preset in OPENAI_COMPATIBLE.items():
        assert f"`{preset.api_key_env}`" in table, name
