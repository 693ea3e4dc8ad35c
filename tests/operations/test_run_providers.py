"""``run`` against real transports: an OpenAI-compatible SSE server on 127.0.0.1 and the fake
agentic CLI (a subprocess), including session resume and process cleanup."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from anyio.abc import Process

from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Message,
)
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed
from tests.helpers import assert_idle, assert_one_terminal_per_start, observed_branch
from tests.payloads import TEXT_REPLY, TOOL_REPLY, call_delta, chunk
from tests.processes import assert_gone, assert_reaped, fake_model, pids, spawned_processes
from tests.service.http_server import AWAIT_CLOSE, Reply, ScriptedServer
from tests.streams import multiply, openai_model

pytestmark = pytest.mark.anyio


def kinds(messages: list[Message]) -> list[str]:
    return [type(m).__name__ for m in messages]


async def collect(stream: AsyncIterator[Message]) -> list[Message]:
    return [message async for message in stream]


# -- OpenAI-compatible server ----------------------------------------------------------------


async def test_openai_sse_tool_call_then_text(server: ScriptedServer) -> None:
    server.reply(TOOL_REPLY, TEXT_REPLY)
    model = openai_model(server)
    branch, rec, _ = observed_branch(system="Be brief.", chat_model=model, tools=[multiply])
    seen = await collect(branch.run("What is 6 x 7?"))
    await model.aclose()

    assert kinds(seen) == [
        "Instruction",
        "AssistantResponse",
        "ActionRequest",
        "ActionResponse",
        "AssistantResponse",
    ]
    _, preface, request, response, answer = seen
    assert isinstance(preface, AssistantResponse)
    assert preface.content == "Let me compute."
    assert isinstance(request, ActionRequest)
    assert (request.call_id, request.function, request.arguments) == (
        "call_a",
        "multiply",
        {"a": 6, "b": 7},
    )
    assert isinstance(response, ActionResponse)
    assert (response.request_id, response.output) == (request.id, 42)
    assert isinstance(answer, AssistantResponse)
    assert answer.content == "6 x 7 = 42."
    assert answer.model == "gpt-test-0001"
    assert list(branch.msgs)[1:] == seen

    first, second = (r.json for r in server.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["multiply"]
    assert first["stream"] is True
    assistant, tool = second["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == "Let me compute."
    assert assistant["tool_calls"][0]["id"] == "call_a"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"a": 6, "b": 7}
    assert tool == {"role": "tool", "tool_call_id": "call_a", "content": "42"}

    [end] = rec.terminals()
    assert isinstance(end, RunEnd)
    assert (end.input_tokens, end.output_tokens, end.num_turns) == (40, 10, 2)
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_openai_stream_closed_early_closes_the_connection(server: ScriptedServer) -> None:
    server.reply(
        Reply(
            events=[
                chunk({"content": "Thinking."}),
                call_delta(0, id="call_a", name="multiply", arguments="{}"),
                AWAIT_CLOSE,
            ]
        )
    )
    model = openai_model(server)
    branch, rec, _ = observed_branch(chat_model=model, tools=[multiply])
    stream = branch.run("go")
    await anext(stream)
    preface = await anext(stream)
    assert isinstance(preface, AssistantResponse)
    assert preface.content == "Thinking."
    await stream.aclose()
    closed = await anyio.to_thread.run_sync(server.client_closed.wait, 30.0)
    assert closed, "the server never saw the connection close"
    await model.aclose()
    assert isinstance(rec.terminals()[0], RunEnd)
    assert kinds(list(branch.msgs)) == ["Instruction", "AssistantResponse"]
    assert_idle(branch)


# -- the agentic CLI ------------------------------------------------------------------------
@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Process]]:
    """Every process the provider starts; anything left is killed at teardown."""
    with spawned_processes(monkeypatch) as recorded:
        yield recorded


async def test_cli_tools_become_requests_and_responses(
    tmp_path: Path, spawned: list[Process]
) -> None:
    branch, rec, _ = observed_branch(chat_model=fake_model("tools", tmp_path))
    seen = await collect(branch.run("Look at a.txt"))
    assert kinds(seen) == [
        "Instruction",
        "AssistantResponse",
        "ActionRequest",
        "ActionRequest",
        "ActionResponse",
        "ActionResponse",
        "AssistantResponse",
    ]
    _, look, read, bash, read_out, bash_out, done = seen
    assert isinstance(look, AssistantResponse)
    assert look.content == "Let me look."
    assert isinstance(read, ActionRequest)
    assert isinstance(bash, ActionRequest)
    assert [(r.call_id, r.function, r.arguments) for r in (read, bash)] == [
        ("toolu_1", "Read", {"path": "a.txt"}),
        ("toolu_2", "Bash", {"command": "false"}),
    ]
    assert isinstance(read_out, ActionResponse)
    assert isinstance(bash_out, ActionResponse)
    assert (read_out.request_id, read_out.output, read_out.is_error) == (
        read.id,
        "line one\nline two",
        False,
    )
    assert (bash_out.request_id, bash_out.output, bash_out.is_error) == (
        bash.id,
        "exit status 1",
        True,
    )
    assert isinstance(done, AssistantResponse)
    assert done.content == "Done."
    assert list(branch.msgs) == seen
    [end] = rec.terminals()
    assert isinstance(end, RunEnd)
    # whole prompt: 11 uncached + 5 cache reads + 3 cache writes
    assert (end.input_tokens, end.output_tokens, end.total_cost_usd) == (19, 7, 0.0125)
    assert branch._resume_ids == {"claude_code": "fake-session-1"}
    assert len(spawned) == 1
    assert_reaped(spawned[0])
    assert_idle(branch)


async def test_cli_session_is_resumed_by_the_next_run(
    tmp_path: Path, spawned: list[Process]
) -> None:
    branch = observed_branch(system="Be terse.", chat_model=fake_model("echo", tmp_path))[0]
    first = await collect(branch.run("first question"))
    received = json.loads(_text(first[-1]))
    assert received["resume"] is None
    assert received["append_system_prompt"] == "Be terse."
    assert branch._resume_ids == {"claude_code": "fake-session-1"}

    second = await collect(branch.run("and now?"))
    received = json.loads(_text(second[-1]))
    assert received["resume"] == "fake-session-1"
    assert received["prompt"] == "and now?"

    # the stored session is the Branch's, so a call-specific CLI model resumes it too
    other = fake_model("echo", tmp_path, model="opus")
    third = await collect(branch.run("third", chat_model=other))
    assert json.loads(_text(third[-1]))["resume"] == "fake-session-1"
    for process in spawned:
        assert_reaped(process)


def _text(message: Message) -> str:
    assert isinstance(message, AssistantResponse)
    return message.content


async def test_cli_cancel_directive_ends_the_stream_and_leaves_no_process(
    tmp_path: Path, spawned: list[Process]
) -> None:
    branch, rec, session = observed_branch(chat_model=fake_model("hang", tmp_path))
    accepted: list[bool] = []

    def on_message(signal: MessageAdded, _: Any) -> None:
        if isinstance(signal.message, AssistantResponse):
            accepted.append(branch.control("cancel", turn_id=signal.turn_id))

    session.observe(MessageAdded, on_message)
    seen = await collect(branch.run("work forever"))
    assert accepted == [True]
    assert kinds(seen) == ["Instruction", "AssistantResponse"]
    assert _text(seen[1]) == "working"
    assert isinstance(rec.terminals()[0], RunEnd)
    child, grandchild = pids(tmp_path)
    assert child == spawned[0].pid
    assert_reaped(spawned[0])
    assert_gone(grandchild)
    assert_idle(branch)


async def test_cli_stream_closed_early_leaves_no_process(
    tmp_path: Path, spawned: list[Process]
) -> None:
    branch, rec, _ = observed_branch(chat_model=fake_model("hang", tmp_path))
    stream = branch.run("work forever")
    await anext(stream)
    assert _text(await anext(stream)) == "working"
    await stream.aclose()
    assert_reaped(spawned[0])
    assert_gone(pids(tmp_path)[1])
    assert isinstance(rec.terminals()[0], RunEnd)
    assert_idle(branch)


async def test_cli_consumer_cancelled_leaves_no_process(
    tmp_path: Path, spawned: list[Process]
) -> None:
    branch, rec, _ = observed_branch(chat_model=fake_model("hang", tmp_path))
    working = anyio.Event()

    async def consume() -> None:
        async for message in branch.run("work forever"):
            if isinstance(message, AssistantResponse):
                working.set()

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await working.wait()
        group.cancel_scope.cancel()
    assert_reaped(spawned[0])
    assert_gone(pids(tmp_path)[1])
    [failed] = rec.terminals()
    assert isinstance(failed, RunFailed)
    assert_one_terminal_per_start(rec)
    assert_idle(branch)
