"""lionagi.testing.Recorder and assert_one_terminal_per_start, as users' own tests use them."""

from __future__ import annotations

from uuid import uuid4

import anyio
import pytest

from lionagi import Session
from lionagi.protocols.messages import Instruction
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart, Signal
from lionagi.testing import Recorder, TestModel, assert_one_terminal_per_start


async def test_recorder_sees_each_turn_once_in_order() -> None:
    session = Session()
    recorder = Recorder()
    session.observe(Signal, recorder)
    branch = session.new_branch(chat_model=TestModel(default="ok"))
    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(branch.chat_and_record, "hi")
    assert [kind for kind, _ in recorder.lifecycle()] == ["RunStart", "RunEnd"] * 3
    assert len(recorder.starts()) == len(recorder.terminals()) == 3
    assert recorder.kinds().count("MessageAdded") == len(recorder.messages()) == 6
    assert_one_terminal_per_start(recorder)


def test_a_turn_without_its_terminal_is_reported() -> None:
    turn = uuid4()
    recorder = Recorder([RunStart(turn_id=turn)])
    with pytest.raises(AssertionError, match=f"turn {turn}: 1 RunStart and 0 terminal"):
        assert_one_terminal_per_start(recorder)
    recorder.signals += [RunEnd(turn_id=turn), RunFailed(turn_id=turn)]
    with pytest.raises(AssertionError, match="1 RunStart and 2 terminal"):
        assert_one_terminal_per_start(recorder)


def test_a_message_after_its_terminal_is_reported() -> None:
    turn = uuid4()
    late = MessageAdded(message=Instruction(instruction="late"), turn_id=turn)
    recorder = Recorder([RunStart(turn_id=turn), RunEnd(turn_id=turn), late])
    with pytest.raises(AssertionError, match="after its terminal"):
        assert_one_terminal_per_start(recorder)
    recorder.signals.insert(1, recorder.signals.pop())
    assert_one_terminal_per_start(recorder)
