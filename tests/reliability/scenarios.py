"""The subjects the cancellation sweep attacks: each public operation, through the whole stack.

Every factory builds a fresh Branch in a Session with a recording observer, so each attempt of a
sweep starts from the same state. ``SUBJECTS`` are offline (deterministic scheduling points);
the HTTP and CLI factories take a running server or a process list and are swept at
geometrically spaced ticks, since their calls wait on I/O.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

from anyio.lowlevel import checkpoint
from pydantic import BaseModel

from lionagi.operations.turn import run_in_turn, stream_in_turn
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import ActionRequest, Instruction, Message, ToolCall
from lionagi.service.imodel import iModel
from lionagi.session.signal import Signal
from lionagi.testing import FunctionModel
from tests.helpers import observed_branch
from tests.reliability.harness import SECRET, Subject

__all__ = [
    "SUBJECTS",
    "Person",
    "cli_run_subject",
    "cli_subject",
    "http_run_subject",
    "http_subject",
    "routing_server",
]

Factory = Callable[[], Awaitable[Subject]]


class Person(BaseModel):
    name: str
    age: int


PERSON_JSON = '{"name": "Ada", "age": 36}'


def _ok(messages: Sequence[Message], **options: Any) -> str:
    return "ok"


async def _slow_handler(signal: Signal, session: Any) -> None:
    for _ in range(3):
        await checkpoint()


async def _clock(branch: Any, instruction: Instruction) -> str:
    await checkpoint()
    return "time: noon"


async def _notes(branch: Any, instruction: Instruction) -> str:
    for _ in range(2):
        await checkpoint()
    return "notes: none"


def _equals(expected: Any) -> Callable[[Any], None]:
    def check(result: Any) -> None:
        assert result == expected

    return check


# -- offline subjects -----------------------------------------------------------------------------
async def chat() -> Subject:
    branch, recorder, _ = observed_branch(chat_model=FunctionModel(_ok))
    return Subject(branch, recorder, lambda b: b.chat("hi"), check=_equals("ok"))


async def chat_and_record_observed() -> Subject:
    """Slow async observer handlers and two context providers add scheduling points."""
    branch, recorder, session = observed_branch(system="be brief", chat_model=FunctionModel(_ok))
    session.observe(Signal, _slow_handler)
    branch.providers.register(_clock)
    branch.providers.register(_notes, priority=1)
    return Subject(branch, recorder, lambda b: b.chat_and_record("hi"), check=_equals("ok"))


async def chat_and_record_tool_calls() -> Subject:
    """A reply with two tool calls: the reply and its requests are recorded together."""
    calls = [ToolCall(id="c1", name="lookup", arguments={"q": 1}), ToolCall(id="c2", name="sum")]

    def reply(messages: Sequence[Message], **options: Any) -> Any:
        last = messages[-1]
        return calls if isinstance(last, Instruction) and last.instruction == "use tools" else "ok"

    branch, recorder, _ = observed_branch(chat_model=FunctionModel(reply))
    return Subject(branch, recorder, lambda b: b.chat_and_record("use tools"), check=_equals(""))


async def communicate_reformat() -> Subject:
    """The reply is not JSON, so the parse model reformats it inside the same turn."""

    def reply(messages: Sequence[Message], **options: Any) -> str:
        return "Ada is thirty-six" if "response_format" in options else "ok"

    branch, recorder, _ = observed_branch(
        chat_model=FunctionModel(reply),
        parse_model=FunctionModel(lambda messages, **options: PERSON_JSON),
    )
    return Subject(
        branch,
        recorder,
        lambda b: b.communicate("who?", response_format=Person),
        check=_equals(Person(name="Ada", age=36)),
    )


async def parse_reformat() -> Subject:
    branch, recorder, _ = observed_branch(
        chat_model=FunctionModel(_ok),
        parse_model=FunctionModel(lambda messages, **options: PERSON_JSON),
    )
    return Subject(
        branch,
        recorder,
        lambda b: b.parse("Ada, 36 years", response_format=Person),
        check=_equals(Person(name="Ada", age=36)),
    )


async def interpret() -> Subject:
    branch, recorder, _ = observed_branch(chat_model=FunctionModel(lambda m, **o: " better "))
    return Subject(
        branch,
        recorder,
        lambda b: b.interpret("make it better", domain="docs"),
        check=_equals("better"),
        followup=lambda b: b.chat("again"),
        followup_result=" better ",
    )


async def driver_nested_work() -> Subject:
    """A coroutine turn whose nested tasks record messages and call the Branch again."""
    branch, recorder, _ = observed_branch(chat_model=FunctionModel(_ok))

    async def child(scope: TurnScope, label: str) -> str:
        await checkpoint()
        reply: str = await branch.chat(label)
        return reply

    async def body(scope: TurnScope) -> list[str]:
        branch.msgs.add(Instruction(instruction="parent"))
        handles = [scope.start_soon(child, scope, f"child{i}") for i in range(2)]
        return [await handle.wait() for handle in handles]

    return Subject(
        branch,
        recorder,
        lambda b: run_in_turn(b, model=None, invoke=body),
        check=_equals(["ok", "ok"]),
        instruction_with_reply=False,
    )


def _counting_stream(branch: Any) -> Callable[[TurnScope], AsyncIterator[int]]:
    async def body(scope: TurnScope) -> AsyncIterator[int]:
        for i in range(3):
            branch.msgs.add(Instruction(instruction=f"item {i}"))
            await checkpoint()
            yield i

    return body


async def driver_stream() -> Subject:
    branch, recorder, _ = observed_branch(chat_model=FunctionModel(_ok))

    async def consume(b: Any) -> list[int]:
        async with aclosing(stream_in_turn(b, model=None, invoke=_counting_stream(b))) as items:
            return [item async for item in items]

    return Subject(
        branch, recorder, consume, check=_equals([0, 1, 2]), instruction_with_reply=False
    )


async def driver_stream_closed_early() -> Subject:
    """The consumer stops after the first item: aclose() ends the turn with RunEnd."""
    branch, recorder, _ = observed_branch(chat_model=FunctionModel(_ok))

    async def consume(b: Any) -> int:
        async with aclosing(stream_in_turn(b, model=None, invoke=_counting_stream(b))) as items:
            async for item in items:
                return item
        raise AssertionError("the stream yielded nothing")

    return Subject(branch, recorder, consume, check=_equals(0), instruction_with_reply=False)


# -- tools and composed operations ----------------------------------------------------------------
async def add(a: int, b: int) -> int:
    """Add two integers (async, with scheduling points of its own)."""
    await checkpoint()
    await checkpoint()
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two integers (sync: runs in a worker thread)."""
    return a * b


TOOL_CALLS = [
    ToolCall(id="call_add", name="add", arguments={"a": 1, "b": 2}),
    ToolCall(id="call_mul", name="multiply", arguments={"a": 3, "b": 4}),
]


class Total(BaseModel):
    total: int


def _tool_model(answer: str) -> FunctionModel:
    """Asks for both tools when they are offered and no result is in yet; then ``answer`` to
    a structured request, and "ok" to anything else (the follow-up turn)."""

    def reply(messages: Sequence[Message], **options: Any) -> Any:
        last = messages[-1]
        if options.get("tools") and type(last).__name__ != "ActionResponse":
            return list(TOOL_CALLS)
        if "response_format" in options:
            return answer
        return "ok"

    return FunctionModel(reply)


async def operate_with_tools() -> Subject:
    branch, recorder, _ = observed_branch(
        chat_model=_tool_model('{"total": 15}'), tools=[add, multiply]
    )

    def check(result: Any) -> None:
        assert result.total == 15
        assert [r.output for r in result.action_responses] == [3, 12]

    return Subject(
        branch,
        recorder,
        lambda b: b.operate(instruction="sum", response_format=Total, actions=True),
        check=check,
    )


async def act_inside_a_turn() -> Subject:
    """A composed turn: a recorded reply with tool calls, then act on them, in one turn."""

    def reply(messages: Sequence[Message], **options: Any) -> Any:
        last = messages[-1]
        is_ask = isinstance(last, Instruction) and last.instruction == "use tools"
        return list(TOOL_CALLS) if is_ask else "ok"

    branch, recorder, _ = observed_branch(chat_model=FunctionModel(reply), tools=[add, multiply])

    async def body(scope: TurnScope) -> list[Any]:
        await branch.chat_and_record("use tools")
        requests = [m for m in branch.msgs if isinstance(m, ActionRequest)]
        responses = await branch.act(requests)
        return [r.output for r in responses]

    return Subject(
        branch,
        recorder,
        lambda b: run_in_turn(b, model=None, invoke=body, operation="composed"),
        check=_equals([3, 12]),
    )


def _react_model() -> FunctionModel:
    """Round 1 calls both tools, then asks for one more round; round 2 is done; the final
    answer is text."""
    rounds = 0

    def reply(messages: Sequence[Message], **options: Any) -> Any:
        nonlocal rounds
        schema = options.get("response_format") or {}
        if schema.get("title") != "ReActAnalysis":
            return "final" if "response_format" not in options else PERSON_JSON
        last = messages[-1]
        if options.get("tools") and type(last).__name__ != "ActionResponse" and rounds == 0:
            return list(TOOL_CALLS)
        rounds += 1
        return json.dumps({"analysis": f"round {rounds}", "extension_needed": rounds < 2})

    return FunctionModel(reply)


async def react() -> Subject:
    branch, recorder, _ = observed_branch(chat_model=_react_model(), tools=[add, multiply])
    return Subject(
        branch,
        recorder,
        lambda b: b.ReAct("think", max_extensions=2),
        check=_equals("final"),
        followup_result="final",
    )


async def react_stream() -> Subject:
    branch, recorder, _ = observed_branch(chat_model=_react_model(), tools=[add, multiply])

    async def consume(b: Any) -> list[Any]:
        async with aclosing(b.ReActStream("think", max_extensions=2)) as items:
            return [item async for item in items]

    def check(items: Any) -> None:
        assert [getattr(i, "analysis", i) for i in items] == ["round 1", "round 2", "final"]

    return Subject(branch, recorder, consume, check=check, followup_result="final")


async def run_with_tools() -> Subject:
    def reply(messages: Sequence[Message], **options: Any) -> Any:
        last = messages[-1]
        if options.get("tools") and type(last).__name__ != "ActionResponse":
            return list(TOOL_CALLS)
        return "done"

    branch, recorder, _ = observed_branch(chat_model=FunctionModel(reply), tools=[add, multiply])

    async def consume(b: Any) -> list[str]:
        async with aclosing(b.run("compute")) as messages:
            return [type(m).__name__ async for m in messages]

    return Subject(
        branch,
        recorder,
        consume,
        check=_equals(
            [
                "Instruction",
                "ActionRequest",
                "ActionRequest",
                "ActionResponse",
                "ActionResponse",
                "AssistantResponse",
            ]
        ),
        followup_result="done",
        atomic_replies=False,
    )


SUBJECTS: dict[str, Factory] = {
    "chat": chat,
    "chat_and_record+observers+providers": chat_and_record_observed,
    "chat_and_record+tool_calls": chat_and_record_tool_calls,
    "communicate+reformat": communicate_reformat,
    "parse+reformat": parse_reformat,
    "interpret": interpret,
    "driver:nested_work": driver_nested_work,
    "driver:stream": driver_stream,
    "driver:stream_closed_early": driver_stream_closed_early,
    "operate+tools": operate_with_tools,
    "act_inside_a_turn": act_inside_a_turn,
    "ReAct+tools": react,
    "ReActStream+tools": react_stream,
    "run+tools": run_with_tools,
}


# -- I/O subjects ---------------------------------------------------------------------------------
def http_subject(server: Any) -> Factory:
    """chat_and_record through the OpenAI-compatible provider against a local server."""
    from tests.service.http_server import Reply

    def completion(text: str) -> Reply:
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return Reply(json={"id": "1", "model": "m", "choices": [choice]})

    async def make() -> Subject:
        server.reply(completion("ok"), completion("ok"))  # this call and the follow-up
        model = iModel("openai", "gpt-test", base_url=f"{server.url}/v1", api_key=SECRET)
        branch, recorder, _ = observed_branch(system="s", chat_model=model)
        return Subject(
            branch,
            recorder,
            lambda b: b.chat_and_record("hi"),
            check=_equals("ok"),
            aclose=model.aclose,
        )

    return make


def _sse(data: Any) -> str:
    return f"data: {json.dumps(data)}\n\n"


def _delta(delta: dict[str, Any], finish: str | None = None) -> str:
    return _sse(
        {
            "id": "1",
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def routing_server() -> Any:
    """A local OpenAI-compatible server that answers by what a request asks, not from a queue:
    a streamed request offering tools gets a streamed tool call (until a tool result is in),
    other streamed requests a streamed "done", whole requests a whole "ok". Cancelled attempts
    therefore leave nothing queued for the next one."""
    from tests.service.http_server import Reply, ScriptedServer

    class RoutingServer(ScriptedServer):
        def next_reply(self) -> Reply:
            with self._lock:
                body = self.requests[-1].json
            if not body.get("stream"):
                choice = {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
                return Reply(json={"id": "1", "model": "m", "choices": [choice]})
            answered = any(m.get("role") == "tool" for m in body.get("messages", ()))
            if body.get("tools") and not answered:
                call = {
                    "index": 0,
                    "id": "call_mul",
                    "type": "function",
                    "function": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'},
                }
                events = [
                    _delta({"content": "Let me compute."}),
                    _delta({"tool_calls": [call]}),
                    _delta({}, finish="tool_calls"),
                ]
            else:
                events = [_delta({"content": "done"}), _delta({}, finish="stop")]
            return Reply(events=[*events, "data: [DONE]\n\n"])

    return RoutingServer()


def http_run_subject(server: Any) -> Factory:
    """run() streaming from an OpenAI-compatible server (SSE), with a native tool call."""

    async def make() -> Subject:
        model = iModel("openai", "gpt-test", base_url=f"{server.url}/v1", api_key=SECRET)
        branch, recorder, _ = observed_branch(chat_model=model, tools=[multiply])

        async def consume(b: Any) -> list[str]:
            async with aclosing(b.run("compute")) as messages:
                return [type(m).__name__ async for m in messages]

        return Subject(
            branch,
            recorder,
            consume,
            check=_equals(
                [
                    "Instruction",
                    "AssistantResponse",
                    "ActionRequest",
                    "ActionResponse",
                    "AssistantResponse",
                ]
            ),
            aclose=model.aclose,
            atomic_replies=False,
        )

    return make


FAKE_CLAUDE = Path(__file__).parent.parent / "service" / "fake_claude.py"
CLI_TEXT = "Hello from the fake CLI."


def cli_model(
    mode: str, *, timeout: float | None = 60, env: dict[str, str] | None = None
) -> iModel:
    return iModel(
        "claude_code",
        "sonnet",
        executable=[sys.executable, str(FAKE_CLAUDE)],
        env={"FAKE_CLAUDE_MODE": mode, **(env or {})},
        timeout=timeout,
        api_key=SECRET,
    )


def cli_run_subject(processes: list[Any]) -> Factory:
    """run() streaming the agentic CLI's events, tool calls and results run on its side."""

    async def make() -> Subject:
        branch, recorder, _ = observed_branch(chat_model=cli_model("tools"))

        async def consume(b: Any) -> list[str]:
            async with aclosing(b.run("look around")) as messages:
                return [type(m).__name__ async for m in messages]

        return Subject(
            branch,
            recorder,
            consume,
            check=_equals(
                [
                    "Instruction",
                    "AssistantResponse",
                    "ActionRequest",
                    "ActionRequest",
                    "ActionResponse",
                    "ActionResponse",
                    "AssistantResponse",
                ]
            ),
            followup_result="Done.",
            processes=processes,
            atomic_replies=False,
        )

    return make


def cli_subject(processes: list[Any]) -> Factory:
    """chat_and_record through the agentic CLI provider (a real subprocess per call)."""

    async def make() -> Subject:
        branch, recorder, _ = observed_branch(chat_model=cli_model("normal"))
        return Subject(
            branch,
            recorder,
            lambda b: b.chat_and_record("hi"),
            check=_equals(CLI_TEXT),
            followup_result=CLI_TEXT,
            processes=processes,
        )

    return make
