"""The claude_code provider against a fake CLI: event mapping, errors, and process reaping."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import AssistantResponse, Instruction, System, Usage
from lionagi.service.errors import ProtocolError, ProviderTimeout, ServerError
from lionagi.service.imodel import iModel
from lionagi.service.types import (
    FinalChunk,
    TextDelta,
    ToolCallDelta,
    ToolResultEvent,
    UsageChunk,
)
from tests.processes import assert_gone, assert_reaped, fake_model, pids, spawned_processes

ASK = [Instruction(instruction="Say hello.")]


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Process]]:
    """Every process the provider starts, recorded the moment it is spawned."""
    with spawned_processes(monkeypatch) as recorded:
        yield recorded


async def echo(model: iModel, messages: list[Any], **kw: Any) -> dict[str, Any]:
    response = await model.invoke(messages, **kw)
    received: dict[str, Any] = json.loads(response.text)
    return received


# -- mapping -------------------------------------------------------------------------------
async def test_invoke_returns_result_usage_and_session(
    tmp_path: Path, spawned: list[Process]
) -> None:
    response = await fake_model("normal", tmp_path).invoke(ASK)
    assert response.text == "Hello from the fake CLI."
    assert response.session_id == "fake-session-1"
    assert response.provider == "claude_code"
    assert response.model == "claude-sonnet-fake"
    assert response.finish_reason == "success"
    assert response.tool_calls == ()
    # the CLI reports 11 uncached input tokens beside 5 read from and 3 written to the cache;
    # the shared convention counts the whole prompt
    assert response.usage == Usage(
        input_tokens=19,
        output_tokens=7,
        cached_input_tokens=5,
        cache_write_tokens=3,
        cost_usd=0.0125,
    )
    assert isinstance(response.raw, dict)
    assert response.raw["type"] == "result"
    assert len(spawned) == 1
    assert_reaped(spawned[0])


async def test_stream_chunk_sequence(tmp_path: Path, spawned: list[Process]) -> None:
    # "unterminated" ends its last line without a newline.
    for mode in ("normal", "unterminated"):
        chunks = [chunk async for chunk in fake_model(mode, tmp_path).stream(ASK)]
        assert [type(c) for c in chunks] == [TextDelta, UsageChunk, FinalChunk], mode
        assert chunks[0] == TextDelta(text="Hello from the fake CLI.", complete=True)
        assert isinstance(chunks[1], UsageChunk)
        assert chunks[1].usage.cost_usd == 0.0125
        assert isinstance(chunks[2], FinalChunk)
        assert chunks[2].response.text == "Hello from the fake CLI."
        assert chunks[2].response.usage == chunks[1].usage
    assert len(spawned) == 2
    for process in spawned:
        assert_reaped(process)


async def test_tool_use_maps_to_tool_chunks(tmp_path: Path) -> None:
    chunks = [chunk async for chunk in fake_model("tools", tmp_path).stream(ASK)]
    assert chunks[:5] == [
        TextDelta(text="Let me look.", complete=True),
        ToolCallDelta(index=0, id="toolu_1", name="Read", arguments='{"path": "a.txt"}'),
        ToolCallDelta(index=1, id="toolu_2", name="Bash", arguments='{"command": "false"}'),
        ToolResultEvent(call_id="toolu_1", output="line one\nline two", is_error=False),
        ToolResultEvent(call_id="toolu_2", output="exit status 1", is_error=True),
    ]
    assert chunks[5] == TextDelta(text="Done.", complete=True)
    assert [type(c).__name__ for c in chunks[6:]] == ["UsageChunk", "FinalChunk"]
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert final.response.text == "Done."
    assert final.response.tool_calls == ()


# -- arguments -----------------------------------------------------------------------------
async def test_first_turn_passes_prompt_model_and_system(tmp_path: Path) -> None:
    messages = [
        System(content="Be terse."),
        Instruction(instruction="old question"),
        AssistantResponse(content="old answer"),
        Instruction(instruction="--help is not a flag here"),
    ]
    received = await echo(fake_model("echo", tmp_path), messages)
    assert received["prompt"] == "--help is not a flag here"
    assert received["model"] == "sonnet"
    assert received["append_system_prompt"] == "Be terse."
    assert received["resume"] is None
    assert received["system_prompt"] is None


async def test_resume_passes_session_and_skips_system(tmp_path: Path) -> None:
    model = fake_model("echo", tmp_path)
    messages = [System(content="Be terse."), Instruction(instruction="and now?")]
    response = await model.invoke(messages, session_id="sess-42")
    received = json.loads(response.text)
    assert received["resume"] == "sess-42"
    assert received["append_system_prompt"] is None
    assert received["prompt"] == "and now?"
    assert response.session_id == "sess-42"


async def test_default_model_omits_model_flag(tmp_path: Path) -> None:
    received = await echo(fake_model("echo", tmp_path, model="default"), ASK)
    assert received["model"] is None


async def test_settings_reach_the_cli(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    model = fake_model(
        "echo",
        tmp_path,
        api_key="sk-test-key",
        cwd=workdir,
        permission_mode="acceptEdits",
        allowed_tools=["Read", "Bash(git log:*)"],
        disallowed_tools="Edit",
        system_prompt="You are a reviewer.",
        max_turns=3,
        extra_args=["--add-dir", str(tmp_path), "--debug"],
        env={"FAKE_CLAUDE_MARKER": "set-by-env"},
    )
    received = await echo(model, ASK)
    assert received["cwd"] == str(workdir.resolve())
    assert received["permission_mode"] == "acceptEdits"
    assert received["allowed_tools"] == "Read,Bash(git log:*)"
    assert received["disallowed_tools"] == "Edit"
    assert received["system_prompt"] == "You are a reviewer."
    assert received["max_turns"] == 3
    assert received["add_dir"] == [str(tmp_path)]
    assert received["extra"] == ["--debug"]
    assert received["api_key"] == "sk-test-key"
    assert received["marker"] == "set-by-env"
    assert received["prompt"] == "Say hello."


# -- failures ------------------------------------------------------------------------------
async def test_nonzero_exit_is_server_error_with_stderr(
    tmp_path: Path, spawned: list[Process]
) -> None:
    with pytest.raises(ServerError) as info:
        await fake_model("fail", tmp_path).invoke(ASK)
    assert "exit code 1" in str(info.value)
    assert "Invalid API key" in str(info.value)
    assert_reaped(spawned[0])


async def test_error_result_is_server_error(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="error_max_turns"):
        await fake_model("error_result", tmp_path).invoke(ASK)


async def test_garbage_line_is_protocol_error(tmp_path: Path, spawned: list[Process]) -> None:
    with pytest.raises(ProtocolError, match="this is not json"):
        await fake_model("garbage", tmp_path).invoke(ASK)
    assert_reaped(spawned[0])


async def test_exit_without_result_is_protocol_error(tmp_path: Path) -> None:
    chunks = fake_model("no_result", tmp_path).stream(ASK)
    assert await chunks.__anext__() == TextDelta(text="partial", complete=True)
    with pytest.raises(ProtocolError, match="without a result"):
        await chunks.__anext__()


async def test_overlong_line_is_protocol_error(tmp_path: Path, spawned: list[Process]) -> None:
    model = fake_model("long_line", tmp_path)
    model.provider.max_line_bytes = 1024  # type: ignore[attr-defined]
    with pytest.raises(ProtocolError, match="longer than 1024 bytes"):
        await model.invoke(ASK)
    assert_reaped(spawned[0])


async def test_missing_executable_is_configuration_error(tmp_path: Path) -> None:
    model = iModel("claude_code", "sonnet", executable="no-such-claude-cli-here")
    with pytest.raises(ConfigurationError, match="no-such-claude-cli-here"):
        await model.invoke(ASK)
    with pytest.raises(ConfigurationError, match="no-such-claude-cli-here"):
        async for _ in model.stream(ASK):
            pass


async def test_missing_instruction_is_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="Instruction"):
        await fake_model("normal", tmp_path).invoke([System(content="only a system prompt")])


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ConfigurationError, match="max_turns"):
        iModel("claude_code", "sonnet", max_turns=0)
    with pytest.raises(ConfigurationError, match="executable"):
        iModel("claude_code", "sonnet", executable=[])


def test_env_is_not_serialized() -> None:
    model = iModel("claude_code", "sonnet", env={"SECRET_TOKEN": "hunter2"}, max_turns=2)
    data = model.to_dict()
    assert "env" not in data["provider_settings"]
    assert "hunter2" not in json.dumps(data)
    assert data["provider_settings"]["max_turns"] == 2


# -- the process always goes away ----------------------------------------------------------
async def test_timeout_reaps_the_process(tmp_path: Path, spawned: list[Process]) -> None:
    model = fake_model("hang", tmp_path, timeout=0.3)
    with pytest.raises(ProviderTimeout):
        await model.invoke(ASK)
    assert len(spawned) == 1
    assert_reaped(spawned[0])
    if (tmp_path / "pids").exists():  # absent if stopped before it started its grandchild
        assert_gone(pids(tmp_path)[1])


async def test_stream_timeout_reaps_the_process(tmp_path: Path, spawned: list[Process]) -> None:
    model = fake_model("hang", tmp_path, timeout=0.3)
    with pytest.raises(ProviderTimeout):
        async for _ in model.stream(ASK):
            pass
    assert_reaped(spawned[0])
    if (tmp_path / "pids").exists():  # absent if stopped before it started its grandchild
        assert_gone(pids(tmp_path)[1])


async def test_cancel_reaps_process_and_grandchild(tmp_path: Path, spawned: list[Process]) -> None:
    model = fake_model("hang", tmp_path)
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

    assert received == [TextDelta(text="working", complete=True)]
    child, grandchild = pids(tmp_path)
    assert child == spawned[0].pid
    assert spawned[0].returncode == 128 + signal.SIGTERM
    assert_gone(child)
    assert_gone(grandchild)


async def test_aclose_after_first_chunk_reaps_the_process(
    tmp_path: Path, spawned: list[Process]
) -> None:
    chunks = fake_model("hang", tmp_path).stream(ASK)
    first = await chunks.__anext__()
    assert first == TextDelta(text="working", complete=True)
    await chunks.aclose()
    assert_reaped(spawned[0])
    assert_gone(pids(tmp_path)[1])


async def test_process_ignoring_sigterm_is_killed(tmp_path: Path, spawned: list[Process]) -> None:
    model = fake_model("stubborn", tmp_path)
    model.provider.terminate_grace = 0.1  # type: ignore[attr-defined]
    chunks = model.provider.stream(model.request(ASK))
    assert await chunks.__anext__() == TextDelta(text="working", complete=True)
    await chunks.aclose()  # type: ignore[attr-defined]
    assert spawned[0].returncode == -signal.SIGKILL
    assert_gone(pids(tmp_path)[0])
