"""Faults at every boundary of a turn: provider HTTP and streams, the agentic CLI, tools,
observer handlers and context providers.

Each fault must give a typed error (or a contained report entry), the documented terminal
signal, whole messages in the history, no leftover task or process, and a Branch that serves
the next turn normally.
"""

from __future__ import annotations

import gc
import logging
import socket
import sys
import threading
import warnings
from collections.abc import Sequence
from contextlib import aclosing
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint

from lionagi.errors import ActionError, ConfigurationError, LionError
from lionagi.operations.turn import run_in_turn
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import ActionResponse, Instruction, Message, ToolCall
from lionagi.protocols.tools import Tool
from lionagi.service.errors import (
    AuthenticationError,
    BadRequestError,
    ProtocolError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
)
from lionagi.service.imodel import iModel
from lionagi.session.branch import Branch
from lionagi.session.session import Session
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart, Signal
from lionagi.testing import FunctionModel
from tests.helpers import Recorder, closing, observed_branch
from tests.reliability.harness import (
    SECRET,
    branch_violations,
    history_violations,
    process_violations,
)
from tests.reliability.scenarios import CLI_TEXT, Total, cli_model
from tests.service.http_server import DROP, HANG, Reply, ScriptedServer, sse

pytestmark = pytest.mark.anyio


async def drain(stream: Any) -> None:
    async with aclosing(stream) as items:
        async for _ in items:
            pass


def kinds(messages: Sequence[Message]) -> list[str]:
    return [type(m).__name__ for m in messages]


def assert_failed_turn(
    branch: Branch, recorder: Recorder, error: BaseException, *, tasks: int
) -> None:
    """One turn, ended by RunFailed carrying exactly ``error``; nothing left behind."""
    assert [s.kind for s in recorder.terminals()] == ["RunFailed"]
    [failed] = recorder.terminals()
    assert isinstance(failed, RunFailed)
    assert failed.data is error
    assert len(recorder.starts()) == 1
    assert branch_violations(branch) == []
    assert len(anyio.get_running_tasks()) == tasks
    assert SECRET not in str(error)
    assert SECRET not in repr(error)
    assert SECRET not in failed.model_dump_json()


async def assert_next_turn_works(
    branch: Branch, recorder: Recorder, expected: Any = "ok", **kwargs: Any
) -> None:
    seen = len(recorder.signals)
    assert await branch.chat_and_record("next", **kwargs) == expected
    lifecycle = [s.kind for s in recorder.signals[seen:] if isinstance(s, RunStart | RunEnd)]
    assert lifecycle == ["RunStart", "RunEnd"]
    assert branch_violations(branch) == []


# -- provider HTTP --------------------------------------------------------------------------------
def completion(text: str = "ok") -> Reply:
    message = {"role": "assistant", "content": text}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return Reply(json={"id": "1", "model": "m", "choices": [choice]})


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return sse(
        {
            "id": "1",
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def stream_reply(text: str = "ok") -> Reply:
    return Reply(events=[chunk({"content": text}), chunk({}, finish="stop"), "data: [DONE]\n\n"])


def _error(status: int, message: str, **headers: str) -> Reply:
    return Reply(status=status, json={"error": {"message": message}}, headers=headers)


HTTP_FAULTS: dict[str, tuple[Reply, type[ProviderError]]] = {
    "401 echoing the key": (
        _error(401, f"Incorrect API key provided: {SECRET}"),
        AuthenticationError,
    ),
    "403": (_error(403, "forbidden"), AuthenticationError),
    "429 retry-after": (_error(429, "slow down", **{"retry-after": "7"}), RateLimitError),
    "400": (_error(400, "bad request"), BadRequestError),
    "500": (_error(500, "internal error"), ServerError),
    "503 plain text": (
        Reply(status=503, body=b"upstream down", headers={"content-type": "text/plain"}),
        ServerError,
    ),
    "body not JSON": (
        Reply(body=b"<html>gateway</html>", headers={"content-type": "text/html"}),
        ProtocolError,
    ),
    "JSON without choices": (Reply(json={"id": "1", "object": "nothing"}), ProtocolError),
    "dropped mid-body": (
        Reply(events=['{"id": "1", "choi', DROP], headers={"content-type": "application/json"}),
        ProviderConnectionError,
    ),
    "no answer (timeout)": (Reply(hang=True), ProviderTimeout),
}

# a stream that fails before a whole message arrived commits nothing, not even its instruction
STREAM_FAULTS: dict[str, tuple[Reply, type[ProviderError], list[str]]] = {
    "stream 401": (_error(401, f"bad key {SECRET}"), AuthenticationError, []),
    "stream 429": (_error(429, "quota"), RateLimitError, []),
    "stream 500": (_error(500, "boom"), ServerError, []),
    "dropped mid-stream": (
        Reply(events=[chunk({"content": "Hel"}), DROP]),
        ProviderConnectionError,
        [],
    ),
    "malformed SSE": (
        Reply(events=[chunk({"content": "a"}), "data: {not json\n\n"]),
        ProtocolError,
        [],
    ),
    "error event in stream": (
        Reply(
            events=[chunk({"content": "x"}), sse({"error": {"message": "overloaded", "code": 503}})]
        ),
        ServerError,
        [],
    ),
    "stream ends unfinished": (
        Reply(events=[chunk({"content": "Hel"})]),
        ProtocolError,
        [],
    ),
    "stream stalls (timeout)": (
        Reply(events=[chunk({"content": "a"}), HANG]),
        ProviderTimeout,
        [],
    ),
}


def http_model(server: ScriptedServer, *, timeout: float = 10.0) -> iModel:
    # one request per call: these faults must surface as they are (retries: test_retry.py)
    return iModel(
        "openai",
        "gpt-test",
        base_url=f"{server.url}/v1",
        api_key=SECRET,
        timeout=timeout,
        retry=None,
    )


@pytest.mark.parametrize("fault", list(HTTP_FAULTS))
async def test_http_fault_in_chat(server: ScriptedServer, fault: str) -> None:
    reply, error_type = HTTP_FAULTS[fault]
    server.reply(reply, completion())
    model = http_model(server, timeout=0.5 if reply.hang else 10.0)
    branch, recorder, _ = observed_branch(system="s", chat_model=model)
    tasks = len(anyio.get_running_tasks())
    with pytest.raises(error_type) as caught:
        await branch.chat_and_record("hi")
    assert type(caught.value) is error_type or fault == "no answer (timeout)"
    assert kinds(branch.msgs) == ["System"]  # no reply: the instruction is not committed
    assert_failed_turn(branch, recorder, caught.value, tasks=tasks)
    if error_type is RateLimitError:
        assert caught.value.retry_after == 7.0  # type: ignore[attr-defined]
    await model.aclose()
    branch.chat_model = model = http_model(server)  # the timeout case's 0.5 s is not for this
    await assert_next_turn_works(branch, recorder)
    await model.aclose()


@pytest.mark.parametrize("fault", list(STREAM_FAULTS))
async def test_http_fault_in_streamed_run(server: ScriptedServer, fault: str) -> None:
    reply, error_type, history = STREAM_FAULTS[fault]
    server.reply(reply, stream_reply(), completion())
    model = http_model(server, timeout=0.5 if "timeout" in fault else 10.0)
    branch, recorder, _ = observed_branch(chat_model=model)
    tasks = len(anyio.get_running_tasks())
    seen: list[Message] = []

    async def consume() -> None:
        async with closing(branch.run("hi")) as stream:
            async for message in stream:
                seen.append(message)  # noqa: PERF401

    with pytest.raises(error_type) as caught:
        await consume()
    assert kinds(branch.msgs) == history
    assert list(branch.msgs) == seen
    assert_failed_turn(branch, recorder, caught.value, tasks=tasks)
    await model.aclose()
    # the next streamed turn, then an ordinary one (the timeout case's 0.5 s is not for these)
    branch.chat_model = model = http_model(server)
    assert kinds([m async for m in branch.run("again")]) == ["Instruction", "AssistantResponse"]
    await assert_next_turn_works(branch, recorder)
    await model.aclose()


async def test_connection_refused_is_a_connection_error_and_the_branch_recovers(
    server: ScriptedServer,
) -> None:
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = iModel("openai", "m", base_url=f"http://127.0.0.1:{port}/v1", api_key=SECRET, retry=None)
    live = http_model(server)
    server.reply(completion())
    branch, recorder, _ = observed_branch(chat_model=dead)
    tasks = len(anyio.get_running_tasks())
    with pytest.raises(ProviderConnectionError, match="cannot connect") as caught:
        await branch.chat_and_record("hi")
    assert_failed_turn(branch, recorder, caught.value, tasks=tasks)
    branch.chat_model = live
    await assert_next_turn_works(branch, recorder)
    await dead.aclose()
    await live.aclose()


# -- the agentic CLI ------------------------------------------------------------------------------
SUICIDE = (
    "import json, os, signal, sys\n"
    "print(json.dumps({'type': 'system', 'subtype': 'init', 'session_id': 's'}), flush=True)\n"
    "os.kill(os.getpid(), signal.SIGKILL)\n"
)

CLI_FAULTS: dict[str, tuple[dict[str, Any], type[LionError], str]] = {
    "crash (exit 1)": ({"mode": "fail"}, ServerError, "exit code 1"),
    "killed by a signal": (
        {"executable": [sys.executable, "-c", SUICIDE]},
        ServerError,
        "exit code -9",
    ),
    "garbage output": ({"mode": "garbage"}, ProtocolError, "not a JSON object"),
    "error result": ({"mode": "error_result"}, ServerError, "error_max_turns"),
    "no result": ({"mode": "no_result"}, ProtocolError, "without a result"),
    "hang (timeout)": ({"mode": "hang", "timeout": 0.5}, ProviderTimeout, "0.5s"),
    "ignores SIGTERM (timeout)": ({"mode": "stubborn", "timeout": 0.5}, ProviderTimeout, "0.5s"),
    "missing executable": (
        {"executable": "no-such-cli-for-lionagi"},
        ConfigurationError,
        "not found on PATH",
    ),
}


def faulty_cli(spec: dict[str, Any]) -> iModel:
    model = cli_model(spec.get("mode", "normal"), timeout=spec.get("timeout", 60))
    if "executable" in spec:
        model = iModel(
            "claude_code", "sonnet", executable=spec["executable"], api_key=SECRET, timeout=60
        )
    model.provider.terminate_grace = 0.2  # type: ignore[attr-defined]
    return model


@pytest.mark.parametrize("fault", list(CLI_FAULTS))
@pytest.mark.parametrize("operation", ["chat_and_record", "run"])
async def test_cli_fault(processes: list[Any], fault: str, operation: str) -> None:
    spec, error_type, match = CLI_FAULTS[fault]
    branch, recorder, _ = observed_branch(chat_model=faulty_cli(spec))
    tasks = len(anyio.get_running_tasks())
    with pytest.raises(error_type, match=match) as caught:
        await (drain(branch.run("hi")) if operation == "run" else branch.chat_and_record("hi"))
    # nothing, or the instruction with the reply messages that arrived before the fault
    assert kinds(branch.msgs)[:1] in ([], ["Instruction"])
    assert history_violations(branch.msgs, None) == []
    assert_failed_turn(branch, recorder, caught.value, tasks=tasks)
    assert process_violations(processes) == []
    branch.chat_model = cli_model("normal")
    await assert_next_turn_works(branch, recorder, CLI_TEXT)
    assert process_violations(processes) == []


# -- tools ----------------------------------------------------------------------------------------
class Opaque:
    """Something a tool returns that has no JSON form."""


def raising(a: int) -> int:
    """Always fails."""
    raise ValueError(f"cannot handle {a}")


async def hanging(a: int) -> int:
    """Never returns."""
    await anyio.sleep_forever()
    return a


def opaque(a: int) -> Any:
    """Returns something unserializable."""
    return Opaque()


_release_sync = threading.Event()


def blocking(a: int) -> int:
    """Blocks its worker thread until the test releases it."""
    _release_sync.wait(30)
    return a


TOOL_FAULTS: dict[str, tuple[Tool, str]] = {
    "raises": (Tool(raising), "ValueError: cannot handle 1"),
    "hangs (async, timeout)": (Tool(hanging, timeout=0.3), "did not finish within 0.3s"),
    "hangs (sync thread, timeout)": (Tool(blocking, timeout=0.3), "did not finish within 0.3s"),
    "unserializable output": (Tool(opaque), "cannot convert"),
}


def _calling(name: str) -> FunctionModel:
    def reply(messages: Sequence[Message], **options: Any) -> Any:
        last = messages[-1]
        if options.get("tools") and not isinstance(last, ActionResponse):
            return [ToolCall(id="c1", name=name, arguments={"a": 1})]
        return '{"total": 1}' if "response_format" in options else "ok"

    return FunctionModel(reply)


@pytest.mark.parametrize("fault", list(TOOL_FAULTS))
@pytest.mark.parametrize("operation", ["operate", "run", "act_in_turn"])
async def test_tool_fault_becomes_an_error_response(fault: str, operation: str) -> None:
    tool, message = TOOL_FAULTS[fault]
    branch, recorder, _ = observed_branch(chat_model=_calling(tool.name), tools=[tool])
    tasks = len(anyio.get_running_tasks())
    try:
        if operation == "operate":
            result = await branch.operate(instruction="go", response_format=Total, actions=True)
            assert result.total == 1
            assert result.action_responses[0].is_error
        elif operation == "run":
            async with closing(branch.run("go")) as stream:
                seen = [type(m).__name__ async for m in stream]
            assert seen == ["Instruction", "ActionRequest", "ActionResponse", "AssistantResponse"]
        else:

            async def body(scope: TurnScope) -> Any:
                return await branch.act({"function": tool.name, "arguments": {"a": 1}})

            response = await run_in_turn(branch, model=None, invoke=body)
            assert response.is_error
    finally:
        _release_sync.set()
    [answer] = [m for m in branch.msgs if isinstance(m, ActionResponse)]
    assert answer.is_error
    assert message in str(answer.output)
    assert [s.kind for s in recorder.terminals()] == ["RunEnd"]
    assert history_violations(branch.msgs, None) == []
    assert branch_violations(branch) == []
    assert len(anyio.get_running_tasks()) == tasks
    await assert_next_turn_works(branch, recorder)
    _release_sync.clear()


async def test_tool_error_raised_on_request_fails_the_turn_with_it() -> None:
    branch, recorder, _ = observed_branch(tools=[raising])
    tasks = len(anyio.get_running_tasks())

    async def body(scope: TurnScope) -> Any:
        return await branch.act(
            {"function": "raising", "arguments": {"a": 1}}, suppress_errors=False
        )

    with pytest.raises(ActionError, match="cannot handle 1") as caught:
        await run_in_turn(branch, model=None, invoke=body)
    assert kinds(branch.msgs) == ["ActionRequest", "ActionResponse"]
    assert_failed_turn(branch, recorder, caught.value, tasks=tasks)
    await assert_next_turn_works(branch, recorder)


async def test_tool_arguments_failing_validation_become_an_error_response() -> None:
    branch, recorder, _ = observed_branch(tools=[raising])

    async def body(scope: TurnScope) -> Any:
        return await branch.act({"function": "raising", "arguments": {"a": "not a number"}})

    response = await run_in_turn(branch, model=None, invoke=body)
    assert response.is_error
    assert "argument 'a'" in response.output["error"]
    assert [s.kind for s in recorder.terminals()] == ["RunEnd"]
    await assert_next_turn_works(branch, recorder)


# -- observer handlers ----------------------------------------------------------------------------
HOOKS: dict[str, type[Signal]] = {
    "start": RunStart,
    "message": MessageAdded,
    "end": RunEnd,
    "failed": RunFailed,
}


def _handler(behaviour: str, hook: type[Signal], calls: list[str]) -> Any:
    if behaviour == "raises":

        def raises(signal: Signal, session: Any) -> None:
            calls.append(signal.kind)
            raise RuntimeError(f"handler broke on {signal.kind}")

        return raises
    if behaviour == "raises after awaiting":

        async def raises_async(signal: Signal, session: Any) -> None:
            calls.append(signal.kind)
            await checkpoint()
            raise RuntimeError(f"handler broke on {signal.kind}")

        return raises_async

    async def slow(signal: Signal, session: Any) -> None:
        for _ in range(50):
            await checkpoint()
        calls.append(signal.kind)

    return slow


@pytest.mark.parametrize("behaviour", ["raises", "raises after awaiting", "slow"])
@pytest.mark.parametrize("hook", list(HOOKS))
async def test_observer_fault_never_changes_the_outcome(
    hook: str, behaviour: str, caplog: pytest.LogCaptureFixture
) -> None:
    def reply(messages: Sequence[Message], **options: Any) -> str:
        last = messages[-1]
        if isinstance(last, Instruction) and last.instruction == "fail":
            raise KeyError("model failed")
        return "ok"

    branch, recorder, session = observed_branch(chat_model=FunctionModel(reply))
    calls: list[str] = []
    session.observe(HOOKS[hook], _handler(behaviour, HOOKS[hook], calls))
    tasks = len(anyio.get_running_tasks())
    caplog.set_level(logging.DEBUG)

    assert await branch.chat_and_record("hello") == "ok"
    with pytest.raises(KeyError, match="model failed") as caught:
        await branch.chat_and_record("fail")

    assert recorder.lifecycle()[0][0] == "RunStart"
    assert [s.kind for s in recorder.terminals()] == ["RunEnd", "RunFailed"]
    assert recorder.terminals()[1].data is caught.value  # type: ignore[union-attr]
    assert calls  # the handler ran
    if behaviour != "slow":
        assert "handler broke" in caplog.text
    assert kinds(branch.msgs) == ["Instruction", "AssistantResponse"]  # the failed one: nothing
    assert branch_violations(branch) == []
    assert len(anyio.get_running_tasks()) == tasks
    await assert_next_turn_works(branch, recorder)


async def test_cancelled_during_a_start_handler_every_observer_sees_start_then_terminal() -> None:
    session = Session()
    entered = anyio.Event()

    async def slow_start(signal: Signal, session: Any) -> None:
        entered.set()
        for _ in range(5):
            await checkpoint()

    session.observe(RunStart, slow_start)
    recorder = Recorder()  # subscribed after the slow handler
    session.observe(Signal, recorder)
    branch = session.new_branch(chat_model=FunctionModel(lambda messages, **options: "ok"))
    async with anyio.create_task_group() as group:
        group.start_soon(branch.chat_and_record, "hi")
        await entered.wait()
        group.cancel_scope.cancel()
    assert [kind for kind, _ in recorder.lifecycle()] == ["RunStart", "RunFailed"]
    assert branch_violations(branch) == []


@pytest.mark.parametrize("hook", ["start", "message", "end"])
async def test_blocked_handler_holds_the_turn_and_queued_callers_wait(hook: str) -> None:
    """A handler that blocks keeps its turn open (signals are drained, never dropped); a queued
    caller waits, then runs once the handler returns."""
    branch, recorder, session = observed_branch()
    gate = anyio.Event()
    blocked = anyio.Event()

    async def blocker(signal: Signal, session: Any) -> None:
        if not gate.is_set():
            blocked.set()
            await gate.wait()

    session.observe(HOOKS[hook], blocker)
    results: list[str] = []

    async def call(text: str) -> None:
        results.append(await branch.chat_and_record(text))

    async with anyio.create_task_group() as group:
        group.start_soon(call, "first")
        await blocked.wait()
        group.start_soon(call, "second")
        lock = branch._turn_lock
        while lock.tasks_waiting == 0:
            await checkpoint()
        assert len(recorder.starts()) == 1
        gate.set()
    assert results == ["ok", "ok"]
    texts = [m.instruction for m in branch.msgs if isinstance(m, Instruction)]
    assert texts == ["first", "second"]
    lifecycle = [kind for kind, _ in recorder.lifecycle()]
    assert lifecycle == ["RunStart", "RunEnd", "RunStart", "RunEnd"]
    assert branch_violations(branch) == []


# -- context providers ----------------------------------------------------------------------------
async def _raises(branch: Any, instruction: Instruction) -> str:
    raise RuntimeError("provider down")


async def _raises_late(branch: Any, instruction: Instruction) -> str:
    await checkpoint()
    raise OSError("provider disk gone")


def _returns(value: Any) -> Any:
    async def provider(branch: Any, instruction: Instruction) -> Any:
        return value

    return provider


HUGE = "lorem ipsum dolor " * 200_000  # about 3.6 MB

PROVIDER_FAULTS: dict[str, tuple[Any, str, dict[str, Any]]] = {
    "raises": (_raises, "failed", {}),
    "raises after awaiting": (_raises_late, "failed", {}),
    "returns an int": (_returns(42), "failed", {}),
    "returns bytes": (_returns(b"bytes"), "failed", {}),
    "returns a list": (_returns(["a", "b"]), "failed", {}),
    "returns a dict": (_returns({"k": "v"}), "failed", {}),
    "returns whitespace": (_returns("   \n"), "skipped", {}),
    # cut to the whole budget, it no longer fits after the higher-priority block
    "returns huge text": (_returns(HUGE), "dropped", {}),
    "returns huge text, capped": (_returns(HUGE), "degraded", {"max_tokens": 500}),
}


@pytest.mark.parametrize("fault", list(PROVIDER_FAULTS))
async def test_context_provider_fault_is_contained_in_the_report(fault: str) -> None:
    provider, where, settings = PROVIDER_FAULTS[fault]
    model = FunctionModel(lambda messages, **options: "ok")
    branch, recorder, _ = observed_branch(system="base prompt", chat_model=model)
    branch.providers.register(provider, name="faulty", **settings)
    branch.providers.register(_returns("healthy block"), name="healthy", priority=1)
    tasks = len(anyio.get_running_tasks())

    assert await branch.chat_and_record("hi") == "ok"

    report = branch.last_context_report
    assert report is not None
    assert "healthy" in report.fired
    if where == "failed":
        assert "faulty" in report.failed
        assert report.failed["faulty"]
    elif where == "skipped":
        assert "faulty" in report.skipped
    elif where == "dropped":
        assert "faulty" in report.dropped
    else:
        assert "faulty" in report.degraded
    assert report.tokens <= branch.providers.budget
    [request] = model.calls
    system = request.messages[0]
    assert "healthy block" in system.content  # type: ignore[attr-defined]
    assert len(system.content) < 20_000  # type: ignore[attr-defined]  # cut to the budget
    assert branch.msgs[0].content == "base prompt"  # ephemeral
    assert [s.kind for s in recorder.terminals()] == ["RunEnd"]
    assert branch_violations(branch) == []
    assert len(anyio.get_running_tasks()) == tasks
    await assert_next_turn_works(branch, recorder)


# -- stream consumers ------------------------------------------------------------------------------
async def test_a_started_stream_dropped_without_aclose_is_finalized_when_collected() -> None:
    """The consumer's fault: a started run() abandoned without aclose(). Collecting the iterator
    ends the turn (RunEnd, as for aclose) and frees the Branch; trio warns about it."""
    branch, recorder, _ = observed_branch()
    stream = branch.run("hi")
    assert type(await anext(stream)).__name__ == "Instruction"
    assert branch.active_turn_id is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del stream
        gc.collect()
        with anyio.fail_after(10):  # the finalizer runs as a task of its own
            while branch._active_turn_context is not None:
                await checkpoint()
    assert [str(w.message) for w in caught if "stream_in_turn" not in str(w.message)] == []
    assert [s.kind for s in recorder.terminals()] == ["RunEnd"]
    await assert_next_turn_works(branch, recorder)


async def test_a_stream_left_open_holds_the_branch_until_aclose() -> None:
    branch, recorder, _ = observed_branch()
    stream = branch.run("hi")
    await anext(stream)
    order: list[str] = []

    async def other() -> None:
        order.append(await branch.chat_and_record("queued"))

    async with anyio.create_task_group() as group:
        group.start_soon(other)
        lock = branch._turn_lock
        while lock.tasks_waiting == 0:
            await checkpoint()
        order.append("closing")
        await stream.aclose()
    assert order == ["closing", "ok"]
    assert [s.kind for s in recorder.terminals()] == ["RunEnd", "RunEnd"]
    assert branch_violations(branch) == []
