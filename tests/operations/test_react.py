"""ReAct and ReActStream: reasoning rounds, tool use, control between rounds, one turn."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from lionagi.errors import OperationError
from lionagi.operations.react import ReActAnalysis
from lionagi.protocols.messages import (
    ActionResponse,
    AssistantResponse,
    Message,
    ToolCall,
)
from lionagi.session.branch import Branch
from lionagi.session.control import LoopBreak, LoopDirective, StopStream
from lionagi.session.session import Session
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, Signal
from lionagi.testing import FunctionModel, TestModel
from tests.helpers import (
    Recorder,
    assert_idle,
    assert_one_terminal_per_start,
    observed_branch,
)


class Total(BaseModel):
    total: int


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def analysis(text: str, *, more: bool) -> str:
    return json.dumps(
        {"analysis": text, "extension_needed": more, "reason": {"text": f"why {text}"}}
    )


def is_round(options: dict[str, Any]) -> bool:
    schema = options.get("response_format") or {}
    return schema.get("title") == "ReActAnalysis"


def always_more(final: str = "final answer") -> FunctionModel:
    """Every round asks for another; the final request gets ``final``."""
    count = 0

    def fn(messages: Sequence[Message], **options: Any) -> str:
        nonlocal count
        if is_round(options):
            count += 1
            return analysis(f"round {count}", more=True)
        return final

    return FunctionModel(fn)


def kinds(branch: Branch) -> list[str]:
    return [type(m).__name__ for m in branch.msgs]


# -- rounds ---------------------------------------------------------------------------------------
async def test_rounds_extend_up_to_max_extensions_then_answer_in_one_turn() -> None:
    model = always_more()
    branch, rec, _ = observed_branch(chat_model=model, tools=[add])
    answer, analyses = await branch.ReAct("think", max_extensions=2, return_analysis=True)
    assert answer == "final answer"
    assert [a.analysis for a in analyses] == ["round 1", "round 2", "round 3"]
    assert all(isinstance(a, ReActAnalysis) for a in analyses)
    assert analyses[0].reason is not None
    assert analyses[0].reason.content == "why round 1"
    assert len(model.calls) == 4
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunEnd"]
    assert rec.starts()[0].operation == "ReAct"
    turn_id = rec.starts()[0].turn_id
    assert {m.turn_id for m in rec.messages()} == {turn_id}
    [end] = rec.terminals()
    assert isinstance(end, RunEnd)
    assert end.num_turns == 4
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_no_extension_when_not_allowed_or_not_needed() -> None:
    model = always_more()
    branch = Branch(chat_model=model, tools=[add])
    assert await branch.ReAct("think", extension_allowed=False) == "final answer"
    assert len(model.calls) == 2

    done = FunctionModel(
        lambda messages, **options: (
            analysis("enough", more=False) if is_round(options) else "answer"
        )
    )
    branch = Branch(chat_model=done, tools=[add])
    assert await branch.ReAct("think", max_extensions=5) == "answer"
    assert len(done.calls) == 2


async def test_tools_run_in_rounds_and_the_final_answer_follows_response_format() -> None:
    model = TestModel(
        [
            ToolCall(id="c1", name="add", arguments={"a": 20, "b": 22}),
            analysis("added", more=True),
            analysis("checked", more=False),
            '{"total": 42}',
        ]
    )
    branch, rec, _ = observed_branch(chat_model=model, tools=[add])
    answer, analyses = await branch.ReAct(
        "add 20 and 22", response_format=Total, return_analysis=True
    )
    assert answer == Total(total=42)
    assert analyses[0].action_responses[0].output == 42
    assert [a.analysis for a in analyses] == ["added", "checked"]
    # the tool result is in the history the extension round saw
    third = model.calls[2]
    assert any(isinstance(m, ActionResponse) and m.output == 42 for m in third.messages)
    assert model.remaining == 0
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunEnd"]
    assert_idle(branch)


async def test_parameters_are_checked_before_the_turn() -> None:
    branch, rec, _ = observed_branch(tools=[add])
    with pytest.raises(OperationError, match="max_extensions"):
        await branch.ReAct("x", max_extensions=-1)
    with pytest.raises(OperationError, match="response_format"):
        await branch.ReAct("x", response_format=dict)  # type: ignore[arg-type]
    with pytest.raises(OperationError, match="max_extensions"):
        branch.ReActStream("x", max_extensions=1.5)  # type: ignore[arg-type]
    bare, bare_rec, _ = observed_branch()
    with pytest.raises(OperationError, match="register_tools"):
        await bare.ReAct("x")
    assert rec.signals == bare_rec.signals == []


# -- control between rounds -----------------------------------------------------------------------
def directed_branch(directive: LoopDirective) -> tuple[Branch, Recorder, FunctionModel]:
    """A branch whose observer issues ``directive`` when round 1's reply is recorded (which asks
    for another round); the directive is seen at the next control point, between the rounds."""
    issued = anyio.Event()
    session = Session()
    rec = Recorder()
    session.observe(Signal, rec)

    def handler(signal: MessageAdded, _: Any) -> None:
        if isinstance(signal.message, AssistantResponse) and not issued.is_set():
            assert branch.control(directive, reason="observer said so")
            issued.set()

    session.observe(MessageAdded, handler)

    async def fn(messages: Sequence[Message], **options: Any) -> str:
        return analysis("first", more=True) if is_round(options) else "final"

    model = FunctionModel(fn)
    branch = session.new_branch(chat_model=model, tools=[add])
    return branch, rec, model


async def test_break_between_rounds_fails_the_turn_with_loop_break() -> None:
    branch, rec, model = directed_branch(LoopDirective.BREAK)
    with pytest.raises(LoopBreak, match="observer said so"):
        await branch.ReAct("think")
    assert len(model.calls) == 1
    assert kinds(branch) == ["Instruction", "AssistantResponse"]  # no second round started
    [failed] = rec.terminals()
    assert isinstance(failed, RunFailed)
    assert isinstance(failed.data, LoopBreak)
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_cancel_between_rounds_ends_the_turn_cleanly() -> None:
    branch, rec, model = directed_branch(LoopDirective.CANCEL)
    with pytest.raises(StopStream):
        await branch.ReAct("think")
    assert len(model.calls) == 1
    assert isinstance(rec.terminals()[0], RunEnd)
    assert_idle(branch)


async def test_stream_cancel_between_rounds_ends_the_stream_cleanly() -> None:
    branch, rec, model = directed_branch(LoopDirective.CANCEL)
    items = [item async for item in branch.ReActStream("think")]
    assert [i.analysis for i in items] == ["first"]
    assert len(model.calls) == 1
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunEnd"]
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_stream_break_between_rounds_raises_loop_break() -> None:
    branch, rec, _ = directed_branch(LoopDirective.BREAK)
    stream = branch.ReActStream("think")
    first = await anext(stream)
    assert first.analysis == "first"
    with pytest.raises(LoopBreak):
        await anext(stream)
    assert isinstance(rec.terminals()[0], RunFailed)
    assert_idle(branch)


# -- the stream -----------------------------------------------------------------------------------
async def test_stream_yields_each_analysis_then_the_final_answer_as_one_turn() -> None:
    model = always_more(final='{"total": 3}')
    branch, rec, _ = observed_branch(chat_model=model, tools=[add])
    stream = branch.ReActStream("think", max_extensions=1, response_format=Total)
    assert rec.signals == []  # nothing runs before the first item is asked for
    items = [item async for item in stream]
    assert [type(i).__name__ for i in items] == ["ReActAnalysis", "ReActAnalysis", "Total"]
    assert [i.analysis for i in items[:2]] == ["round 1", "round 2"]
    assert items[2] == Total(total=3)
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunEnd"]
    assert rec.starts()[0].operation == "ReActStream"
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_stream_closed_midway_ends_with_run_end_and_frees_the_branch() -> None:
    model = always_more()
    branch, rec, _ = observed_branch(chat_model=model, tools=[add])
    stream = branch.ReActStream("think", max_extensions=3)
    first = await anext(stream)
    assert first.analysis == "round 1"
    assert branch.active_turn_id is not None
    await stream.aclose()
    assert len(model.calls) == 1
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunEnd"]
    assert_one_terminal_per_start(rec)
    assert_idle(branch)
    # the branch takes the next turn at once
    assert await branch.chat("next") == "final answer"
