"""A failing tool reaches the developer: a log record with its traceback and identity, the
error's type and message on the ActionResponse, and a ToolFailed signal -- while the model
still gets only the concise error result."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from lionagi.errors import ToolArgumentError
from lionagi.protocols.messages import ActionRequest, ActionResponse, Message, ToolCall
from lionagi.session.signal import RunEnd, RunStart, ToolFailed
from lionagi.testing import FunctionModel
from tests.helpers import observed_branch


async def lookup(key: str) -> str:
    """Look a key up (has a bug: an undefined name)."""
    return undefined_table[key]  # type: ignore[name-defined,no-any-return]  # noqa: F821


async def loop_time() -> float:
    """Uses asyncio directly: works on asyncio, fails under trio."""
    return asyncio.get_running_loop().time()


def calls_tool(name: str, **arguments: Any) -> FunctionModel:
    """Calls ``name`` once when tools are offered, then answers with the tool's result."""

    def fn(messages: Sequence[Message], **options: Any) -> Any:
        results = [m for m in messages if isinstance(m, ActionResponse)]
        if options.get("tools") and not results:
            return ToolCall(id="call_1", name=name, arguments=arguments)
        return json.dumps({"seen": str(results[-1].output) if results else ""})

    return FunctionModel(fn)


def tool_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "lionagi.tools"]


async def test_a_tool_bug_in_a_turn_is_logged_with_traceback_and_identity(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="lionagi")
    branch, recorder, _ = observed_branch(chat_model=calls_tool("lookup", key="k"), tools=[lookup])
    result = await branch.operate(instruction="find k", actions=True)

    [record] = tool_records(caplog)
    [start] = recorder.starts()
    assert record.levelno == logging.WARNING
    assert record.exc_info is not None
    assert record.exc_info[0] is NameError
    assert "undefined_table" in caplog.text  # the traceback names the failing line
    assert "in lookup" in caplog.text
    assert record.lionagi_tool == "lookup"  # type: ignore[attr-defined]
    assert record.lionagi_call_id == "call_1"  # type: ignore[attr-defined]
    assert record.lionagi_branch_id == str(branch.id)  # type: ignore[attr-defined]
    assert record.lionagi_turn_id == str(start.turn_id)  # type: ignore[attr-defined]
    assert str(start.turn_id) in record.getMessage()

    # the model saw the concise result; the developer gets type and message on the response
    [failed] = result.action_responses
    assert failed.is_error
    assert failed.output == {"error": "NameError: name 'undefined_table' is not defined"}
    assert failed.error_type == "NameError"
    assert failed.error_message == "name 'undefined_table' is not defined"
    assert isinstance(recorder.terminals()[0], RunEnd)


async def test_a_tool_failure_raises_a_signal_before_its_response_and_the_terminal() -> None:
    branch, recorder, _ = observed_branch(chat_model=calls_tool("lookup", key="k"), tools=[lookup])
    await branch.operate(instruction="find k", actions=True)

    [signal] = [s for s in recorder.signals if isinstance(s, ToolFailed)]
    [start] = recorder.starts()
    assert signal.turn_id == start.turn_id
    assert signal.branch_id == branch.id
    assert (signal.function, signal.call_id) == ("lookup", "call_1")
    assert (signal.error_type, signal.error_message) == (
        "NameError",
        "name 'undefined_table' is not defined",
    )
    assert isinstance(signal.data, NameError)
    assert signal.data.__traceback__ is not None
    request = next(m for m in branch.msgs if isinstance(m, ActionRequest))
    assert signal.request_id == request.id
    # JSON form: the error as text, no traceback
    dumped = signal.model_dump(mode="json")
    assert dumped["data"] == "NameError: name 'undefined_table' is not defined"
    order = [type(s).__name__ for s in recorder.signals]
    position = recorder.signals.index(signal)
    response_at = next(
        i
        for i, s in enumerate(recorder.signals)
        if getattr(s, "message", None) is not None and isinstance(s.message, ActionResponse)  # type: ignore[attr-defined]
    )
    assert position < response_at < order.index("RunEnd")


async def test_asyncio_only_code_in_a_tool_fails_visibly_under_trio(
    anyio_backend: tuple[str, dict[str, object]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="lionagi")
    branch, _, _ = observed_branch(chat_model=calls_tool("loop_time"), tools=[loop_time])
    result = await branch.operate(instruction="time?", actions=True)
    [response] = result.action_responses
    if anyio_backend[0] == "asyncio":
        assert not response.is_error
        assert tool_records(caplog) == []
    else:
        assert response.is_error
        assert response.error_type == "RuntimeError"
        [record] = tool_records(caplog)
        assert record.exc_info is not None
        assert record.exc_info[0] is RuntimeError
        assert "get_running_loop" in caplog.text


async def test_act_outside_a_turn_logs_without_a_turn_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="lionagi")
    branch, recorder, _ = observed_branch(tools=[lookup])
    response = await branch.act({"function": "lookup", "arguments": {"key": "k"}})
    assert response.error_type == "NameError"
    [record] = tool_records(caplog)
    assert record.lionagi_turn_id is None  # type: ignore[attr-defined]
    [signal] = [s for s in recorder.signals if isinstance(s, ToolFailed)]
    assert signal.turn_id is None
    assert not recorder.starts()


async def test_a_bad_call_is_logged_at_info_with_its_typed_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="lionagi")
    branch, _, _ = observed_branch(tools=[lookup])
    response = await branch.act({"function": "lookup", "arguments": {"key": 3, "x": 1}})
    assert response.error_type == "ToolArgumentError"
    [record] = tool_records(caplog)
    assert record.levelno == logging.INFO
    assert record.exc_info is not None
    assert record.exc_info[0] is ToolArgumentError


async def test_successful_calls_log_nothing_and_raise_no_signal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fine(key: str) -> str:
        """Echo."""
        return key

    caplog.set_level(logging.DEBUG, logger="lionagi")
    branch, recorder, _ = observed_branch(chat_model=calls_tool("fine", key="k"), tools=[fine])
    result = await branch.operate(instruction="x", actions=True)
    [response] = result.action_responses
    assert (response.error_type, response.error_message) == (None, None)
    assert tool_records(caplog) == []
    assert not [s for s in recorder.signals if isinstance(s, ToolFailed)]
    assert [type(s) for s in recorder.signals][:1] == [RunStart]
