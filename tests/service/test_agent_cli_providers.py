"""The codex and gemini_code CLI providers against a fake CLI: event mapping, errors, and
the process discipline they share with claude_code (nothing is left running)."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import Instruction, System, Usage
from lionagi.service.errors import ProtocolError, ProviderTimeout, ServerError
from lionagi.service.imodel import iModel
from lionagi.service.providers._cli import CLIProvider
from lionagi.service.providers.codex import CodexProvider
from lionagi.service.types import (
    FinalChunk,
    TextDelta,
    ToolCallDelta,
    ToolResultEvent,
)
from tests.processes import assert_gone, assert_reaped, pids, spawned_processes

FAKE = Path(__file__).with_name("fake_agent_cli.py")
ASK = [Instruction(instruction="Say hello.")]
CLIS = ["codex", "gemini_code"]


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Process]]:
    with spawned_processes(monkeypatch) as recorded:
        yield recorded


@pytest.fixture(params=CLIS)
def cli(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def fake_model(
    cli: str, mode: str, tmp_path: Path, *, timeout: float | None = 60, **kw: Any
) -> iModel:
    env = {"FAKE_CLI_MODE": mode, "FAKE_CLI_PID_FILE": str(tmp_path / "pids")}
    env.update(kw.pop("env", {}))
    return iModel(
        cli, "fake-model", executable=[sys.executable, str(FAKE)], env=env, timeout=timeout, **kw
    )


async def echo(model: iModel, messages: list[Any], **kw: Any) -> dict[str, Any]:
    response = await model.invoke(messages, **kw)
    received: dict[str, Any] = json.loads(response.text)
    return received


# -- mapping -------------------------------------------------------------------------------
async def test_invoke_returns_text_usage_and_session(
    cli: str, tmp_path: Path, spawned: list[Process]
) -> None:
    response = await fake_model(cli, "normal", tmp_path).invoke(ASK)
    assert response.text == "Hello from the fake CLI."
    assert response.provider == cli
    assert response.session_id == ("thread-1" if cli == "codex" else "gem-session-1")
    assert response.usage == Usage(input_tokens=11, output_tokens=7, cached_input_tokens=4)
    assert response.tool_calls == ()
    assert len(spawned) == 1
    assert_reaped(spawned[0])


async def test_stream_chunk_sequence(cli: str, tmp_path: Path, spawned: list[Process]) -> None:
    chunks = [c async for c in fake_model(cli, "normal", tmp_path).stream(ASK)]
    texts = [c for c in chunks if isinstance(c, TextDelta)]
    assert "".join(t.text for t in texts) == "Hello from the fake CLI."
    assert [type(c).__name__ for c in chunks[len(texts) :]] == ["UsageChunk", "FinalChunk"]
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert final.response.text == "Hello from the fake CLI."
    assert_reaped(spawned[0])


async def test_codex_items_map_to_tool_chunks(tmp_path: Path) -> None:
    chunks = [c async for c in fake_model("codex", "tools", tmp_path).stream(ASK)]
    assert chunks[:5] == [
        ToolCallDelta(index=0, id="item_1", name="shell", arguments='{"command": "ls"}'),
        ToolResultEvent(call_id="item_1", output="a.txt\n", is_error=False),
        ToolCallDelta(index=1, id="item_2", name="shell", arguments='{"command": "false"}'),
        ToolResultEvent(call_id="item_2", output="", is_error=True),
        TextDelta(text="Done.", complete=True),
    ]
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert final.response.text == "Done."


async def test_gemini_events_map_to_tool_chunks(tmp_path: Path) -> None:
    chunks = [c async for c in fake_model("gemini_code", "tools", tmp_path).stream(ASK)]
    tools = [c for c in chunks if isinstance(c, ToolCallDelta | ToolResultEvent)]
    assert tools == [
        ToolCallDelta(index=0, id="t1", name="read_file", arguments='{"path": "a.txt"}'),
        ToolResultEvent(call_id="t1", output="hello", is_error=False),
        ToolCallDelta(index=1, id="t2", name="run_shell_command", arguments='{"command": "false"}'),
        ToolResultEvent(call_id="t2", output="exit status 1", is_error=True),
    ]
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert final.response.text == "Done."  # the text after the last tool


# -- arguments -----------------------------------------------------------------------------
async def test_first_turn_passes_prompt_model_and_system(cli: str, tmp_path: Path) -> None:
    messages = [System(content="Be terse."), Instruction(instruction="--help is not a flag")]
    received = await echo(fake_model(cli, "echo", tmp_path), messages)
    assert received["prompt"] == "Be terse.\n\n--help is not a flag"
    assert received["model"] == "fake-model"
    assert received["resume"] is None
    assert received["extra"] == []


async def test_resume_passes_session_and_skips_system(cli: str, tmp_path: Path) -> None:
    messages = [System(content="Be terse."), Instruction(instruction="and now?")]
    response = await fake_model(cli, "echo", tmp_path).invoke(messages, session_id="s-42")
    received = json.loads(response.text)
    assert received["resume"] == "s-42"
    assert received["prompt"] == "and now?"
    assert response.session_id == "s-42"


async def test_settings_reach_the_cli(cli: str, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    specific = (
        {"sandbox": "read-only", "skip_git_repo_check": True}
        if cli == "codex"
        else {"approval_mode": "yolo"}
    )
    model = fake_model(
        cli,
        "echo",
        tmp_path,
        api_key="sk-cli-key",
        cwd=workdir,
        extra_args=["--debug"],
        env={"FAKE_CLI_MARKER": "set"},
        **specific,
    )
    received = await echo(model, ASK)
    assert received["cwd"] == str(workdir.resolve())
    assert received["api_key"] == "sk-cli-key"
    assert received["marker"] == "set"
    if cli == "codex":
        assert received["sandbox"] == "read-only"
        assert received["extra"] == ["--skip-git-repo-check", "--debug"]
    else:
        assert received["approval_mode"] == "yolo"
        assert received["extra"] == ["--debug"]


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ConfigurationError, match="sandbox"):
        iModel("codex", "m", sandbox="everything")
    with pytest.raises(ConfigurationError, match="approval_mode"):
        iModel("gemini_code", "m", approval_mode="always")
    with pytest.raises(ConfigurationError, match="does not accept 'max_turns'"):
        CodexProvider(model="m", max_turns=3)
    data = iModel("codex", "m", env={"TOKEN": "hunter2"}).to_dict()
    assert "hunter2" not in json.dumps(data)


# -- failures ------------------------------------------------------------------------------
async def test_nonzero_exit_is_server_error_with_stderr(
    cli: str, tmp_path: Path, spawned: list[Process]
) -> None:
    with pytest.raises(ServerError) as info:
        await fake_model(cli, "fail", tmp_path).invoke(ASK)
    assert "exit code 1" in str(info.value)
    assert "not logged in" in str(info.value)
    assert_reaped(spawned[0])


async def test_error_result_is_server_error(cli: str, tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="usage limit reached"):
        await fake_model(cli, "error_result", tmp_path).invoke(ASK)


async def test_garbage_line_is_protocol_error(
    cli: str, tmp_path: Path, spawned: list[Process]
) -> None:
    with pytest.raises(ProtocolError, match="this is not json"):
        await fake_model(cli, "garbage", tmp_path).invoke(ASK)
    assert_reaped(spawned[0])


async def test_exit_without_result_is_protocol_error(cli: str, tmp_path: Path) -> None:
    with pytest.raises(ProtocolError, match="without a"):
        await fake_model(cli, "no_result", tmp_path).invoke(ASK)


async def test_missing_executable_is_configuration_error(cli: str) -> None:
    model = iModel(cli, "m", executable="no-such-agent-cli-here")
    with pytest.raises(ConfigurationError, match="no-such-agent-cli-here"):
        await model.invoke(ASK)


# -- the process always goes away ----------------------------------------------------------
async def test_timeout_reaps_process_and_grandchild(
    cli: str, tmp_path: Path, spawned: list[Process]
) -> None:
    with pytest.raises(ProviderTimeout):
        await fake_model(cli, "hang", tmp_path, timeout=0.5).invoke(ASK)
    assert_reaped(spawned[0])
    if (tmp_path / "pids").exists():  # absent if stopped before it started its grandchild
        assert_gone(pids(tmp_path)[1])


async def test_cancel_reaps_process_and_grandchild(
    cli: str, tmp_path: Path, spawned: list[Process]
) -> None:
    model = fake_model(cli, "hang", tmp_path)
    first = anyio.Event()
    received: list[Any] = []

    async def consume() -> None:
        async for chunk in model.stream(ASK):
            received.append(chunk)
            first.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await first.wait()
        tg.cancel_scope.cancel()

    assert isinstance(received[0], TextDelta)
    child, grandchild = pids(tmp_path)
    assert child == spawned[0].pid
    assert spawned[0].returncode == 128 + signal.SIGTERM
    assert_gone(child)
    assert_gone(grandchild)


async def test_aclose_after_first_chunk_reaps_the_process(
    cli: str, tmp_path: Path, spawned: list[Process]
) -> None:
    chunks = fake_model(cli, "hang", tmp_path).stream(ASK)
    assert isinstance(await chunks.__anext__(), TextDelta)
    await chunks.aclose()
    assert_reaped(spawned[0])
    assert_gone(pids(tmp_path)[1])


async def test_process_ignoring_sigterm_is_killed(
    cli: str, tmp_path: Path, spawned: list[Process]
) -> None:
    model = fake_model(cli, "stubborn", tmp_path)
    provider = model.provider
    assert isinstance(provider, CLIProvider)
    provider.terminate_grace = 0.1
    chunks = provider.stream(model.request(ASK))
    assert isinstance(await chunks.__anext__(), TextDelta)
    await chunks.aclose()
    assert spawned[0].returncode == -signal.SIGKILL
    assert_gone(pids(tmp_path)[0])
