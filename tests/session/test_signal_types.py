"""The public face of signals: validation of what users build, serialization, immutability,
equality, pickling, and that the signals a turn builds are the ones validation would build."""

from __future__ import annotations

import copy
import json
import pickle
import time
from typing import Any
from uuid import UUID

import pytest
from pydantic import ValidationError

from lionagi import (
    Branch,
    FlowEnd,
    FlowStart,
    MessageAdded,
    ModelRetry,
    NodeEnd,
    NodeFailed,
    NodeSkipped,
    NodeStart,
    RunEnd,
    RunFailed,
    RunStart,
    Session,
    Signal,
    ToolFailed,
)
from lionagi.protocols.messages import Instruction, Usage
from lionagi.service.types import ModelResponse
from lionagi.session.signal import build_run_end
from lionagi.testing import FunctionModel

B = UUID(int=1)
T = UUID(int=2)
F = UUID(int=3)


def _samples() -> list[Signal]:
    message = Instruction(instruction="hi", id=UUID(int=9), created_at=1.0)
    return [
        RunStart(branch_id=B, created_at=5.0, turn_id=T, operation="chat"),
        MessageAdded(branch_id=B, created_at=5.0, message=message, turn_id=T),
        RunEnd(branch_id=B, created_at=5.0, turn_id=T, input_tokens=3, num_turns=1),
        RunFailed(branch_id=B, created_at=5.0, turn_id=T, data=ValueError("bad")),
        ToolFailed(branch_id=B, created_at=5.0, call_id="c1", function="f", data=KeyError("k")),
        ModelRetry(branch_id=B, created_at=5.0, attempt=1, wait=0.5, error="Timeout: slow"),
        FlowStart(created_at=5.0, flow_id=F, node_count=2),
        NodeStart(created_at=5.0, flow_id=F, op_id="a", branch_id=B),
        NodeEnd(created_at=5.0, flow_id=F, op_id="a", turn_id=T, duration_ms=2.0),
        NodeFailed(created_at=5.0, flow_id=F, op_id="a", data=RuntimeError("x")),
        NodeSkipped(created_at=5.0, flow_id=F, op_id="b", reason="dependency failed"),
        FlowEnd(created_at=5.0, flow_id=F, status="failed", failed=1),
    ]


def test_user_input_is_validated_and_coerced_as_pydantic_does() -> None:
    signal = RunStart(branch_id=str(B), turn_id=str(T), created_at=5)
    assert signal.branch_id == B
    assert isinstance(signal.turn_id, UUID)
    assert signal.created_at == 5.0
    assert isinstance(signal.created_at, float)
    with pytest.raises(ValidationError) as caught:
        RunStart(branch_id="not-a-uuid")
    assert caught.value.errors()[0]["loc"] == ("branch_id",)
    with pytest.raises(ValidationError) as caught:
        ModelRetry(attempt=1)
    assert {e["loc"] for e in caught.value.errors()} == {("wait",), ("error",)}
    with pytest.raises(ValidationError) as caught:
        FlowEnd(flow_id=F, status="done")
    assert caught.value.errors()[0]["loc"] == ("status",)
    with pytest.raises(ValidationError):
        MessageAdded(message="not a message")
    # unknown keywords are ignored, as a pydantic model's default is
    assert RunStart(turn_id=T, colour="red").turn_id == T


def test_signals_serialize_as_before() -> None:
    start, added, end, failed, tool, retry, flow_start, *_, node_failed, skipped, flow_end = (
        _samples()
    )
    assert start.model_dump() == {
        "branch_id": B,
        "created_at": 5.0,
        "turn_id": T,
        "operation": "chat",
        "op_id": None,
    }
    assert added.model_dump(mode="json") == {
        "branch_id": str(B),
        "created_at": 5.0,
        "message": {"id": str(UUID(int=9)), "created_at": 1.0},
        "turn_id": str(T),
    }
    assert json.loads(end.model_dump_json()) == {
        "branch_id": str(B),
        "created_at": 5.0,
        "turn_id": str(T),
        "operation": None,
        "op_id": None,
        "input_tokens": 3,
        "output_tokens": 0,
        "total_cost_usd": 0.0,
        "num_turns": 1,
        "attempts": 0,
        "duration_ms": 0.0,
    }
    assert failed.model_dump(mode="json")["data"] == "ValueError: bad"
    assert failed.model_dump()["data"] == "ValueError: bad"
    assert tool.model_dump(mode="json")["data"] == "KeyError: 'k'"
    assert retry.model_dump()["status"] is None
    assert flow_start.model_dump(mode="json")["flow_id"] == str(F)
    assert node_failed.model_dump(mode="json")["data"] == "RuntimeError: x"
    assert skipped.model_dump(exclude={"created_at"}) == {
        "branch_id": None,
        "flow_id": F,
        "op_id": "b",
        "name": None,
        "reason": "dependency failed",
    }
    assert flow_end.model_dump(include={"status", "failed"}) == {"status": "failed", "failed": 1}
    assert start.model_dump_json() == (
        '{"branch_id":"00000000-0000-0000-0000-000000000001","created_at":5.0,'
        '"turn_id":"00000000-0000-0000-0000-000000000002","operation":"chat","op_id":null}'
    )


@pytest.mark.parametrize("signal", _samples(), ids=lambda s: s.kind)
def test_each_signal_is_immutable_comparable_picklable_and_round_trips(signal: Signal) -> None:
    cls = type(signal)
    assert signal.kind == cls.__name__
    assert isinstance(signal, Signal)
    with pytest.raises(ValidationError) as caught:
        signal.branch_id = None
    assert caught.value.errors()[0]["type"] == "frozen_instance"
    with pytest.raises(ValidationError):
        del signal.created_at
    for copied in (pickle.loads(pickle.dumps(signal)), copy.deepcopy(signal)):
        assert type(copied) is cls
        assert copied.model_dump() == signal.model_dump()
        # an exception compares by identity, so only a signal without one is equal to a copy
        assert (copied == signal) is not hasattr(signal, "data")
    assert copy.copy(signal) == signal
    assert signal == cls.model_validate(_values(signal))
    assert signal != signal.model_copy(update={"created_at": 6.0})
    assert signal.model_copy(update={"created_at": 6.0}).created_at == 6.0
    if not isinstance(signal, MessageAdded | RunFailed | ToolFailed | NodeFailed):
        # every field survives its JSON form (a message and an exception dump to less)
        assert cls.model_validate_json(signal.model_dump_json()) == signal
        assert hash(signal) == hash(cls.model_validate(_values(signal)))
    if not hasattr(signal, "data"):  # an exception field has no JSON schema
        assert set(cls.model_json_schema()["properties"]) == set(signal.model_dump())


def test_signals_match_by_class_and_field() -> None:
    seen: list[tuple[str, object]] = []
    for signal in _samples()[:4]:
        match signal:
            case RunStart(operation=operation):
                seen.append(("start", operation))
            case RunEnd(input_tokens=tokens):
                seen.append(("end", tokens))
            case RunFailed(data=ValueError() as error):
                seen.append(("failed", str(error)))
            case _:
                seen.append((signal.kind, None))
    assert seen == [("start", "chat"), ("MessageAdded", None), ("end", 3), ("failed", "bad")]


def _values(signal: Signal) -> dict[str, Any]:
    return {name: getattr(signal, name) for name in signal.model_dump()}


async def test_the_signals_a_turn_builds_are_what_validation_builds_from_the_same_values() -> None:
    session = Session()
    seen: list[Signal] = []
    session.observe(Signal, lambda signal, _: seen.append(signal))
    branch = session.new_branch(chat_model=FunctionModel(lambda messages, **_: "four"))
    await branch.chat_and_record("hi")
    with pytest.raises(RuntimeError):
        await session.new_branch(
            chat_model=FunctionModel(lambda messages, **_: (_ for _ in ()).throw(RuntimeError()))
        ).chat("x")
    assert [s.kind for s in seen] == [
        "RunStart",
        "MessageAdded",
        "MessageAdded",
        "RunEnd",
        "RunStart",
        "RunFailed",
    ]
    for signal in seen:
        values = _values(signal)
        rebuilt = type(signal)(**values)
        assert rebuilt == signal
        for name, value in values.items():  # the same types, not only equal values
            assert type(getattr(rebuilt, name)) is type(value), (signal.kind, name)
        assert isinstance(signal, RunStart | MessageAdded | RunEnd | RunFailed)
        assert signal.turn_id is not None
        assert signal.branch_id is not None
        with pytest.raises(ValidationError):
            signal.turn_id = None


async def test_a_turns_terminal_signal_holds_each_value_in_its_own_field() -> None:
    """RunEnd and RunFailed are built from one tuple of field values: each value must land in
    its field (two fields of one type swapped would still validate)."""
    session = Session()
    seen: list[Signal] = []
    session.observe(Signal, lambda signal, _: seen.append(signal))
    usage = Usage(input_tokens=11, output_tokens=7, cost_usd=0.25)
    branch = session.new_branch(
        chat_model=FunctionModel(lambda messages, **_: ModelResponse(text="ok", usage=usage))
    )
    before = time.time()
    await branch.chat_and_record("hi")
    error = RuntimeError("down")
    with pytest.raises(RuntimeError):
        await session.new_branch(
            chat_model=FunctionModel(lambda messages, **_: (_ for _ in ()).throw(error))
        ).chat("x")
    after = time.time()
    start, end, _, failed = (s for s in seen if isinstance(s, RunStart | RunEnd | RunFailed))
    assert isinstance(end, RunEnd)
    assert (end.branch_id, end.turn_id, end.operation, end.op_id) == (
        branch.id,
        start.turn_id,
        "chat_and_record",
        None,
    )
    assert (end.input_tokens, end.output_tokens, end.total_cost_usd) == (11, 7, 0.25)
    assert (end.num_turns, end.attempts) == (1, 1)
    assert isinstance(failed, RunFailed)
    assert failed.data is error
    assert failed.operation == "chat"
    for signal in (end, failed):
        assert before <= signal.created_at <= after
        assert 0.0 < signal.duration_ms <= (after - before) * 1000.0
        assert type(signal).model_validate(_values(signal)) == signal


def test_build_run_end_takes_the_adrs_arguments_and_reads_the_results_usage() -> None:
    """ADR-0018 D5: ``build_run_end(branch, *, turn_id, duration_ms, result)`` forwards the turn
    id and takes tokens and cost from ``result.usage``; every other field is RunEnd's own."""
    branch = Branch()
    reply = ModelResponse(text="ok", usage=Usage(input_tokens=4, output_tokens=2, cost_usd=0.5))
    end = build_run_end(branch, turn_id=T, duration_ms=3.5, result=reply)
    assert (end.branch_id, end.turn_id, end.duration_ms) == (branch.id, T, 3.5)
    assert (end.input_tokens, end.output_tokens, end.total_cost_usd) == (4, 2, 0.5)
    assert (end.num_turns, end.attempts, end.operation, end.op_id) == (0, 0, None, None)
    bare = build_run_end(object(), result="no usage here")
    assert (bare.branch_id, bare.turn_id, bare.input_tokens, bare.total_cost_usd) == (
        None,
        None,
        0,
        0.0,
    )
    with pytest.raises(TypeError):
        build_run_end(branch, num_turns=2)  # type: ignore[call-arg]  # a RunEnd field


def test_a_signal_class_of_ones_own_is_declared_like_a_model() -> None:
    class Deployed(Signal):
        """A user's own signal."""

        version: str
        canary: bool = False

    signal = Deployed(branch_id=str(B), version="1.2", created_at=5)
    assert (signal.kind, signal.branch_id, signal.version, signal.canary) == (
        "Deployed",
        B,
        "1.2",
        False,
    )
    assert signal.model_dump(mode="json") == {
        "branch_id": str(B),
        "created_at": 5.0,
        "version": "1.2",
        "canary": False,
    }
    with pytest.raises(ValidationError):
        Deployed(version=None)
    with pytest.raises(ValidationError):
        signal.version = "2"
    assert signal.model_copy(update={"canary": True}).canary is True
    assert signal == Deployed(branch_id=B, version="1.2", created_at=5.0)
