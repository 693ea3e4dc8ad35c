"""The API key never shows up in anything the library produces.

Every flow below uses the key ``SECRET`` against a local server or CLI (which receive it, as
checked), then searches the DEBUG log records of every logger, every signal (repr and JSON),
reprs, ``to_dict`` output, the history and the text of every exception in the chain.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from contextlib import aclosing
from typing import Any

import pytest

from lionagi.protocols.messages import Instruction
from lionagi.service.imodel import iModel
from lionagi.session.branch import Branch
from tests.helpers import Recorder, observed_branch
from tests.reliability.harness import SECRET
from tests.reliability.scenarios import cli_model
from tests.service.http_server import Reply, ScriptedServer, sse

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)  # root: every logger, httpx and httpcore included
    return caplog


async def drain(stream: Any) -> None:
    async with aclosing(stream) as items:
        async for _ in items:
            pass


def _chain(error: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while error is not None and error not in seen:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def produced(
    branch: Branch, recorder: Recorder, caplog: pytest.LogCaptureFixture, *errors: BaseException
) -> str:
    """Everything observable that the library produced in the flow, as one text."""
    parts = [caplog.text, repr(branch), json.dumps(branch.to_dict())]
    parts += [m.model_dump_json() for m in branch.msgs]
    for signal in recorder.signals:
        parts += [repr(signal), signal.model_dump_json()]
    for model in (branch.chat_model, branch.parse_model):
        if model is not None:
            parts += [repr(model), repr(model.provider), json.dumps(model.to_dict())]
            parts.append(json.dumps(model.copy().to_dict()))
    for error in errors:
        for link in _chain(error):
            parts += [str(link), repr(link)]
        parts.append("".join(traceback.format_exception(error)))
    return "\n".join(parts)


# one request per call: the error each scripted reply causes is the one examined
def openai(server: ScriptedServer) -> iModel:
    url = f"{server.url}/v1"
    return iModel("openai", "gpt-test", base_url=url, api_key=SECRET, timeout=10, retry=None)


def anthropic(server: ScriptedServer) -> iModel:
    url = server.url
    return iModel("anthropic", "claude-test", base_url=url, api_key=SECRET, timeout=10, retry=None)


def openai_ok() -> Reply:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "ok"},
        "finish_reason": "stop",
    }
    return Reply(json={"id": "1", "model": "m", "choices": [choice]})


def openai_stream_ok() -> Reply:
    delta = {
        "id": "1",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}],
    }
    return Reply(events=[sse(delta), "data: [DONE]\n\n"])


def anthropic_ok() -> Reply:
    return Reply(
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


def echoing_key(status: int) -> Reply:
    """An error whose body repeats the key, as some gateways do."""
    return Reply(
        status=status,
        json={"error": {"message": f"Invalid API key: {SECRET}", "type": "invalid_request_error"}},
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("status", [401, 403, 429, 500])
async def test_http_error_echoing_the_key(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture, provider: str, status: int
) -> None:
    model = openai(server) if provider == "openai" else anthropic(server)
    server.reply(echoing_key(status), openai_ok() if provider == "openai" else anthropic_ok())
    branch, recorder, _ = observed_branch(system="s", chat_model=model)
    with pytest.raises(Exception) as caught:
        await branch.chat_and_record("hi")
    assert await branch.chat_and_record("again") == "ok"
    await model.aclose()
    sent = server.requests[0].headers
    assert SECRET in (sent.get("authorization", "") + sent.get("x-api-key", ""))
    assert SECRET not in produced(branch, recorder, caplog, caught.value)


async def test_streamed_run_with_an_error_echoing_the_key(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    model = openai(server)
    server.reply(echoing_key(401), openai_stream_ok())
    branch, recorder, _ = observed_branch(chat_model=model)
    with pytest.raises(Exception) as caught:
        await drain(branch.run("hi"))
    assert [type(m).__name__ async for m in branch.run("again")][-1] == "AssistantResponse"
    await model.aclose()
    assert SECRET not in produced(branch, recorder, caplog, caught.value)


async def test_successful_turns_and_serialization(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    model = openai(server)
    server.reply(openai_ok(), openai_stream_ok())
    branch, recorder, _ = observed_branch(system="s", chat_model=model, parse_model=model.copy())
    assert await branch.chat_and_record("hi") == "ok"
    assert [type(m).__name__ async for m in branch.run("more")][-1] == "AssistantResponse"
    restored = Branch.from_dict(branch.to_dict())
    await model.aclose()
    text = produced(branch, recorder, caplog)
    assert SECRET not in text
    assert SECRET not in json.dumps(restored.to_dict())
    assert SECRET not in repr(restored)


async def test_cli_run_whose_stderr_does_not_mention_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    branch, recorder, _ = observed_branch(chat_model=cli_model("fail"))
    with pytest.raises(Exception) as caught:
        await branch.chat_and_record("hi")
    branch.chat_model = cli_model("normal")
    assert await branch.chat_and_record("again") == "Hello from the fake CLI."
    assert SECRET not in produced(branch, recorder, caplog, caught.value)


LEAKY_CLI = (
    "import os, sys\n"
    "sys.stderr.write('auth failed for key ' + os.environ['ANTHROPIC_API_KEY'] + '\\n')\n"
    "sys.exit(1)\n"
)


async def test_cli_whose_stderr_prints_the_key(caplog: pytest.LogCaptureFixture) -> None:
    model = iModel(
        "claude_code", "sonnet", executable=[sys.executable, "-c", LEAKY_CLI], api_key=SECRET
    )
    branch, recorder, _ = observed_branch(chat_model=model)
    with pytest.raises(Exception) as caught:
        await branch.chat_and_record("hi")
    assert SECRET not in produced(branch, recorder, caplog, caught.value)


async def test_a_key_in_an_instruction_is_the_callers_text_not_a_leak(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Control: the search does find the key where the caller put it themselves."""
    model = openai(server)
    server.reply(openai_ok())
    branch, recorder, _ = observed_branch(chat_model=model)
    await branch.chat_and_record(Instruction(instruction=f"my key is {SECRET}"))
    await model.aclose()
    assert SECRET in produced(branch, recorder, caplog)
