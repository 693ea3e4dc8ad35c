"""branch.logs, dump_logs / adump_logs as JSON lines without secrets, to_df, async with Branch,
aclone."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic.dataclasses import dataclass as pydantic_dataclass

from benchmarks.memory import kept_objects
from lionagi.errors import ConfigurationError, MissingDependencyError
from lionagi.protocols.messages import ActionResponse, Message, Reasoning, ToolCall, Usage
from lionagi.service.errors import RateLimitError
from lionagi.service.imodel import iModel
from lionagi.service.types import ModelResponse
from lionagi.session.branch import Branch
from lionagi.session.logs import DEFAULT_LOG_DIR, LogManager, mask_secrets
from lionagi.session.session import Session
from lionagi.testing import FunctionModel
from tests.helpers import observed_branch
from tests.payloads import completion
from tests.service.http_server import Reply, ScriptedServer

FAKE_KEY = "sk-FAKE-lionagi-0b5e7c1d9a3f"


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adder() -> FunctionModel:
    def fn(messages: Sequence[Message], **options: Any) -> Any:
        results = [m for m in messages if isinstance(m, ActionResponse)]
        if options.get("tools") and not results:
            return ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})
        return "the total is 5"

    return FunctionModel(fn)


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_logs_hold_each_model_call_and_tool_call_of_the_branch() -> None:
    branch, recorder, _ = observed_branch(chat_model=adder(), tools=[add])
    await branch.operate(instruction="add 2 and 3", actions=True)
    [start] = recorder.starts()
    assert [log.kind for log in branch.logs] == ["api_call", "tool_call", "api_call"]
    assert {log.turn_id for log in branch.logs} == {start.turn_id}
    first, tool, last = (log.to_dict() for log in branch.logs)
    assert first["provider"] == "function"
    assert first["request"]["tools"] == ["add"]
    assert first["request"]["last_message"]["instruction"] == "add 2 and 3"
    assert first["request"]["message_count"] == 1
    assert first["response"]["tool_calls"][0]["name"] == "add"
    assert first["error"] is None
    assert tool["function"] == "add"
    assert tool["response"]["output"] == 5
    assert last["response"]["text"] == "the total is 5"
    assert all(log.duration_ms >= 0 for log in branch.logs)


async def test_a_failed_model_call_is_logged_with_its_error() -> None:
    def broken(messages: Sequence[Message], **options: Any) -> str:
        raise RuntimeError("provider down")

    branch = Branch(chat_model=FunctionModel(broken))
    with pytest.raises(RuntimeError):
        await branch.chat("x")
    [log] = branch.logs
    assert log.to_dict()["error"] == "RuntimeError: provider down"
    assert log.to_dict()["response"] is None


async def test_dump_logs_writes_json_lines_and_clears(tmp_path: Path) -> None:
    branch = Branch(chat_model=adder(), tools=[add])
    await branch.operate(instruction="add", actions=True)
    target = tmp_path / "nested" / "logs.jsonl"
    assert branch.dump_logs(persist_path=target) == target
    assert [r["kind"] for r in read_lines(target)] == ["api_call", "tool_call", "api_call"]
    assert len(branch.logs) == 0
    await branch.act({"function": "add", "arguments": {"a": 1, "b": 1}})
    assert await branch.adump_logs(persist_path=target, clear=False) == target
    assert [r["kind"] for r in read_lines(target)][-1] == "tool_call"  # appended
    assert len(branch.logs) == 1


async def test_dump_logs_without_a_path_writes_under_the_default_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    branch = Branch(chat_model=adder())
    await branch.chat("hi")
    path = await branch.adump_logs()
    assert path.parent == DEFAULT_LOG_DIR
    assert path.name.startswith(f"branch-{branch.id}-")
    assert len(read_lines(tmp_path / path)) == 1


async def test_dumped_logs_hold_no_api_key(server: ScriptedServer, tmp_path: Path) -> None:
    server.reply(Reply(json=completion({"role": "assistant", "content": "hi"})))
    model = iModel("openai", "gpt-test", api_key=FAKE_KEY, base_url=f"{server.url}/v1")
    async with Branch(chat_model=model) as branch:
        assert await branch.chat_and_record("hello") == "hi"
        target = tmp_path / "logs.jsonl"
        branch.dump_logs(persist_path=target)
    # the key was really used on the wire ...
    assert FAKE_KEY in server.requests[0].headers.get("authorization", "")
    # ... and is nowhere in what was dumped
    text = target.read_text(encoding="utf-8")
    assert read_lines(target)[0]["response"]["text"] == "hi"
    assert FAKE_KEY not in text
    assert FAKE_KEY[-12:] not in text


def test_credential_like_option_values_are_masked() -> None:
    masked = mask_secrets(
        {"api_key": FAKE_KEY, "extra_headers": {"Authorization": f"Bearer {FAKE_KEY}"}, "n": 1}
    )
    assert masked == {
        "api_key": "**********",
        "extra_headers": {"Authorization": "**********"},
        "n": 1,
    }


def test_a_bad_log_capacity_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="capacity"):
        LogManager(capacity=0)


async def test_capacity_bounds_the_logs() -> None:
    branch = Branch(chat_model=adder(), logs=LogManager(capacity=2))
    for _ in range(3):
        await branch.chat("x")
    assert len(branch.logs) == 2


async def test_to_df_on_branch_and_session() -> None:
    session = Session()
    one = session.new_branch(system="be brief", chat_model=adder(), tools=[add])
    two = session.new_branch(chat_model=adder())
    await one.operate(instruction="add", actions=True)
    await two.chat_and_record("hello")
    frame = one.to_df()
    assert list(frame.columns) == [
        "branch_id",
        "id",
        "kind",
        "role",
        "created_at",
        "content",
        "message",
    ]
    assert list(frame["kind"]) == [m.model_dump()["kind"] for m in one.msgs]
    assert list(frame["kind"])[:5] == [
        "system",
        "instruction",
        "assistant",
        "action_request",
        "action_response",
    ]
    assert list(frame["id"]) == [str(m.id) for m in one.msgs]
    assert frame["content"].iloc[0] == "be brief"
    assert str(frame["created_at"].dt.tz) == "UTC"
    both = session.to_df()
    assert len(both) == len(one.msgs) + len(two.msgs)
    assert set(both["branch_id"]) == {str(one.id), str(two.id)}


def test_to_df_without_pandas_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingDependencyError, match=r"lionagi\[pandas\]"):
        Branch().to_df()
    with pytest.raises(ImportError):  # also an ImportError, as callers may expect
        Session().to_df()


async def test_async_with_closes_the_models_and_dumps_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[str] = []
    chat, parse = adder(), adder()

    async def close_chat() -> None:
        closed.append("chat")

    async def close_parse() -> None:
        closed.append("parse")

    monkeypatch.setattr(chat, "aclose", close_chat)
    monkeypatch.setattr(parse, "aclose", close_parse)
    target = tmp_path / "exit.jsonl"
    logs = LogManager(persist_path=target, dump_on_exit=True)
    async with Branch(chat_model=chat, parse_model=parse, logs=logs) as branch:
        await branch.chat("x")
        assert not target.exists()
    assert closed == ["chat", "parse"]
    assert [r["kind"] for r in read_lines(target)] == ["api_call"]


async def test_async_with_closes_models_even_when_the_block_is_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closed: list[bool] = []
    model = adder()

    async def close() -> None:
        await anyio.lowlevel.checkpoint()  # would raise if the close were not shielded
        closed.append(True)

    monkeypatch.setattr(model, "aclose", close)
    with anyio.CancelScope() as scope:
        async with Branch(chat_model=model):
            scope.cancel()
            await anyio.lowlevel.checkpoint()
    assert closed == [True]


async def test_aclone_waits_for_the_running_turn() -> None:
    release = anyio.Event()
    entered = anyio.Event()

    async def slow(messages: Sequence[Message], **options: Any) -> str:
        entered.set()
        await release.wait()
        return "done"

    branch = Branch(chat_model=FunctionModel(slow))
    clones: list[Branch] = []

    async def clone_it() -> None:
        clones.append(await branch.aclone())

    async with anyio.create_task_group() as group:
        group.start_soon(branch.chat_and_record, "work")
        await entered.wait()
        group.start_soon(clone_it)
        await anyio.wait_all_tasks_blocked()
        assert clones == []  # still waiting for the turn
        release.set()
    [copy] = clones
    assert copy.id != branch.id
    assert [m.id for m in copy.msgs] == [m.id for m in branch.msgs]
    assert len(copy.msgs) == 2  # the whole turn, never half of it


async def test_aclone_inside_the_branchs_own_turn_copies_at_once() -> None:
    branch = Branch()
    copies: list[Branch] = []

    async def snapshot() -> str:
        """Clone the branch."""
        copies.append(await branch.aclone())
        return "ok"

    branch.register_tools(snapshot)

    def fn(messages: Sequence[Message], **options: Any) -> Any:
        if not any(isinstance(m, ActionResponse) for m in messages):
            return ToolCall(id="c1", name="snapshot", arguments={})
        return "done"

    branch.chat_model = FunctionModel(fn)
    await branch.operate(instruction="snap", actions=True)
    [copy] = copies
    assert len(copy.msgs) < len(branch.msgs)


def rich_reply() -> tuple[FunctionModel, list[ModelResponse]]:
    """A model whose reply fills every field a dump shows; the replies it made are kept."""
    made: list[ModelResponse] = []

    def fn(messages: Sequence[Message], **options: Any) -> ModelResponse:
        made.append(
            ModelResponse(
                text="fine",
                refusal="not that part",
                reasoning=(Reasoning(format="anthropic", text="thought", block={"sig": "s"}),),
                usage=Usage(input_tokens=7, output_tokens=2, cached_input_tokens=3),
                model="rich-1",
                provider="function",
                finish_reason="stop",
                session_id="s-1",
                raw={"id": "r-1", "choices": [1, 2]},
            )
        )
        return made[-1]

    return FunctionModel(fn), made


async def test_an_api_call_record_keeps_the_reply_itself_and_dumps_it_whole() -> None:
    model, made = rich_reply()
    branch = Branch(chat_model=model)
    await branch.chat_and_record("hello")
    [reply] = made
    expected = reply.model_dump(mode="json")
    made.clear()
    [log] = branch.logs
    assert log.to_dict()["response"] == expected
    held = sys.getrefcount(reply)
    del log
    branch.logs.clear()
    gc.collect()
    # the record kept the (immutable) reply itself, not a copy of its values, and was the only
    # thing beside this test that did
    assert sys.getrefcount(reply) == held - 1


async def test_a_record_read_twice_is_the_same_record() -> None:
    branch = Branch(chat_model=adder(), tools=[add])
    await branch.operate(instruction="add 2 and 3", actions=True)
    first = branch.logs[0]
    assert branch.logs[0] is first
    assert next(iter(branch.logs)) is first
    assert branch.logs[:1] == [first]
    assert branch.logs[-1] is list(branch.logs)[-1]
    assert [log.kind for log in branch.logs[::2]] == ["api_call", "api_call"]


async def test_a_bounded_log_keeps_the_newest_records() -> None:
    said: list[str] = []

    def fn(messages: Sequence[Message], **options: Any) -> str:
        said.append(f"reply {len(said)}")
        return said[-1]

    branch = Branch(chat_model=FunctionModel(fn), logs=LogManager(capacity=2))
    for _ in range(3):
        await branch.chat("x")
    assert [log.to_dict()["response"]["text"] for log in branch.logs] == ["reply 1", "reply 2"]
    await branch.chat("x")
    assert [log.to_dict()["response"]["text"] for log in branch.logs] == ["reply 2", "reply 3"]


async def test_a_model_calls_record_is_the_same_from_a_bounded_and_an_unbounded_log() -> None:
    # the common record (unbounded log, plain ModelResponse) is written on the model call's
    # own path; a bounded log's record by LogManager.record_api_call: both read the same
    async def records(logs: LogManager) -> list[dict[str, Any]]:
        branch = Branch(chat_model=adder(), tools=[add], logs=logs)
        await branch.operate(instruction="add 2 and 3", actions=True)
        await branch.chat("y", temperature=0.5, response_format={"title": "Sum", "type": "object"})
        dumped = [log.to_dict() for log in branch.logs]
        for record in dumped:
            assert record.pop("branch_id") == str(branch.id)
            del record["created_at"], record["duration_ms"], record["turn_id"]
            if record["kind"] == "tool_call":
                del record["request"]["id"], record["response"]["id"]
                del record["request"]["created_at"], record["response"]["created_at"]
                del record["response"]["request_id"]
            elif record["request"]["last_message"] is not None:
                del record["request"]["last_message"]["id"]
                del record["request"]["last_message"]["created_at"]
        return dumped

    unbounded = await records(LogManager())
    assert [r["kind"] for r in unbounded] == ["api_call", "tool_call", "api_call", "api_call"]
    assert unbounded[-1]["request"]["response_format"] == "Sum"
    assert unbounded[-1]["request"]["options"] == {"temperature": 0.5}
    assert unbounded == await records(LogManager(capacity=10))


async def test_a_records_request_options_are_dumped_masked(tmp_path: Path) -> None:
    branch = Branch(chat_model=adder())
    await branch.chat("x")
    await branch.chat("y", temperature=0.5, extra_body={"user": "u-1", "api_key": FAKE_KEY})
    target = tmp_path / "logs.jsonl"
    branch.dump_logs(persist_path=target)
    plain, tuned = read_lines(target)
    assert plain["request"]["options"] == {}
    # extra_body's keys are merged into the request's options
    options = {"temperature": 0.5, "user": "u-1", "api_key": "**********"}
    assert tuned["request"]["options"] == options
    assert FAKE_KEY not in target.read_text(encoding="utf-8")


async def test_a_streamed_model_call_is_one_record_with_its_reply() -> None:
    branch = Branch(chat_model=FunctionModel(lambda messages, **options: "streamed reply"))
    async with branch.stream("hi") as events:
        async for _ in events:
            pass
    [log] = branch.logs
    record = log.to_dict()
    assert record["kind"] == "api_call"
    assert record["request"]["last_message"]["instruction"] == "hi"
    assert record["response"]["text"] == "streamed reply"
    assert record["error"] is None


async def test_a_model_calls_record_keeps_one_object_for_the_collector_its_reply() -> None:
    branch = Branch(chat_model=adder())
    for _ in range(3):
        await branch.chat_and_record("hello")
    gc.collect()
    # what only the logs keep alive, beyond the history's messages and the Branch's id
    own = kept_objects(branch.logs, *branch.msgs, branch.id)
    tracked = sorted(type(o).__name__ for o in own.values() if gc.is_tracked(o))
    # three calls, one object per call: the reply itself (copying its values costs more)
    assert tracked == ["LogManager", *["ModelResponse"] * 3, "list"]
    [log, *_] = branch.logs  # read, the records are whole again
    assert log.turn_id is not None
    assert log.to_dict()["response"]["text"] == "the total is 5"


@pydantic_dataclass(frozen=True, slots=True, kw_only=True)
class _TaggedReply(ModelResponse):
    tag: str = "extra"


async def test_a_reply_of_a_model_response_subclass_is_recorded_whole() -> None:
    branch = Branch(chat_model=FunctionModel(lambda messages, **options: _TaggedReply(text="t")))
    await branch.chat_and_record("hello")
    [log] = branch.logs
    assert log.to_dict()["response"]["text"] == "t"
    assert log.to_dict()["response"]["tag"] == "extra"


def test_a_bounded_log_keeps_the_newest_records_in_order_as_capacity_changes() -> None:
    import random
    from collections import deque

    from lionagi.service.types import ModelRequest
    from lionagi.session.logs import Log

    def key(log: Log) -> tuple[str, object]:
        if log.kind == "tool_call":
            return ("tool", log.duration_ms)
        return ("model", log.to_dict()["provider"])

    rng = random.Random(17)
    request = ModelRequest(model="m", messages=())
    logs = LogManager(capacity=3)
    expected: deque[tuple[str, object]] = deque(maxlen=3)
    for step in range(600):
        roll = rng.random()
        if roll < 0.45:
            logs.append(Log("tool_call", (), branch_id=None, turn_id=None, duration_ms=step))
            expected.append(("tool", step))
        elif roll < 0.9:
            logs.record_api_call(f"p{step}", request, None, None, None, None, 0.0)
            expected.append(("model", f"p{step}"))
        else:
            capacity = rng.choice([None, 1, 2, 3, 5, 8])
            logs.capacity = capacity
            expected = deque(expected, maxlen=capacity)
        assert logs.capacity == expected.maxlen
        assert [key(log) for log in logs] == list(expected)
        if expected:
            index = rng.randrange(-len(expected), len(expected))
            assert key(logs[index]) == expected[index]
            assert [key(log) for log in logs[1:]] == list(expected)[1:]
    with pytest.raises(ConfigurationError, match="capacity"):
        logs.capacity = 0


async def test_a_retried_model_call_in_a_turn_is_one_record_with_its_attempts() -> None:
    failures = [RateLimitError("slow down", provider="function", retry_after=0.0)]

    def fn(messages: Sequence[Message], **options: Any) -> str:
        if failures:
            raise failures.pop()
        return "ok"

    branch = Branch(chat_model=FunctionModel(fn))
    assert await branch.chat_and_record("hello") == "ok"
    [log] = branch.logs
    record = log.to_dict()
    assert record["response"]["text"] == "ok"
    assert record["response"]["attempts"] == 2
    assert record["error"] is None
