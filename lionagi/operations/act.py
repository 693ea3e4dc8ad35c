"""``act``: run tool calls and record each request and its result.

Not a model turn (ADR-0018 D2): inside a live turn of the Branch it joins that turn, otherwise
it runs on its own without taking the turn lock or emitting lifecycle signals. Results are
recorded in request order once the batch is over, so the history holds whole messages only.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias
from uuid import UUID, uuid4

import anyio
from pydantic import JsonValue

from lionagi import _instrument
from lionagi.errors import (
    ActionError,
    OperationError,
    ToolArgumentError,
    ToolError,
    ToolNotFoundError,
    UnauthorizedActionError,
)
from lionagi.operations.params import ActionStrategy
from lionagi.operations.turn import control_point, current_scope, run_in_turn
from lionagi.protocols.messages import ActionRequest, ActionResponse, ToolCall
from lionagi.protocols.tools import jsonable
from lionagi.service._text import clean_json, clean_text
from lionagi.session.logs import Log
from lionagi.session.signal import ToolFailed

if TYPE_CHECKING:
    from lionagi.operations.params import ActParams
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch

__all__ = ["ActionInput", "ActionStrategy", "act", "act_batch", "to_action_request"]

ActionInput: TypeAlias = ActionRequest | ToolCall | Mapping[str, Any]

logger = logging.getLogger("lionagi.tools")

# Failures caused by the call rather than the tool's code: logged at INFO, the rest at WARNING.
_CALL_ERRORS = (ToolArgumentError, ToolNotFoundError, UnauthorizedActionError)

_MAPPING_KEYS = frozenset({"function", "name", "arguments", "call_id", "id"})


async def act(
    branch: Branch,
    action_request: ActionInput | Sequence[ActionInput],
    params: ActParams,
) -> ActionResponse | list[ActionResponse]:
    """Run one tool call (or a list of them) and return the ActionResponse(s).

    Each input is an :class:`ActionRequest`, a :class:`ToolCall` or a dict with ``function``
    (or ``name``) and ``arguments``. Requests not yet in the history are recorded first; calls
    run ``"concurrent"``-ly in a task group or ``"sequential"``-ly; responses are recorded in
    request order after the batch. Every call passes the session's authorize gate first.

    With ``suppress_errors`` (default) a refused call, unknown tool, invalid arguments, a
    failing or timed-out tool, or unserializable output becomes an error response; otherwise
    the first error (in request order) is raised after the finished calls are recorded
    (a sequential batch stops at it). Cancellation propagates; calls that did not finish get
    no response.
    """
    single = not isinstance(action_request, list | tuple)
    items: list[Any] = [action_request] if single else list(action_request)  # type: ignore[arg-type]
    requests = [to_action_request(item, index) for index, item in enumerate(items)]
    responses = await act_batch(
        branch,
        requests,
        strategy=params.strategy,
        suppress_errors=params.suppress_errors,
        record=params.record,
    )
    return responses[0] if single else responses


async def act_batch(
    branch: Branch,
    requests: list[ActionRequest],
    *,
    strategy: ActionStrategy = "concurrent",
    suppress_errors: bool = True,
    record: bool = True,
) -> list[ActionResponse]:
    """:func:`act` for requests already built, always a list (what composed operations use)."""

    async def batch(scope: TurnScope | None) -> list[ActionResponse]:
        return await _run_batch(branch, scope, requests, strategy, suppress_errors, record)

    if current_scope(branch) is None:
        return await batch(None)
    # Inside a live turn: run_in_turn classifies this call as nested (nothing awaited since
    # the check), so it joins the turn and owns no lifecycle.
    return await run_in_turn(branch, model=None, invoke=batch, operation="act")


def to_action_request(item: object, index: int = 0) -> ActionRequest:
    """An :class:`ActionRequest` from one ``act`` input; OperationError for a bad shape."""
    if isinstance(item, ActionRequest):
        return item
    if isinstance(item, ToolCall):
        return ActionRequest(call_id=item.id, function=item.name, arguments=dict(item.arguments))
    where = f"action request [{index}]"
    if not isinstance(item, Mapping):
        raise OperationError(
            f"{where} must be an ActionRequest, a ToolCall or a dict with 'function' and "
            f"'arguments', got {type(item).__name__}"
        )
    unknown = sorted(str(k) for k in item if k not in _MAPPING_KEYS)
    if unknown:
        raise OperationError(
            f"{where} has unknown keys {unknown}; use 'function' (or 'name'), 'arguments' and "
            "optionally 'call_id'"
        )
    name = item.get("function", item.get("name"))
    if not isinstance(name, str) or not name:
        raise OperationError(f"{where} needs 'function': the tool name as text, got {name!r}")
    arguments = _arguments(where, item.get("arguments"))
    return ActionRequest(call_id=_call_id(where, item), function=name, arguments=arguments)


def _call_id(where: str, item: Mapping[str, Any]) -> str:
    """A request's ``call_id`` (or ``id``), a new one when it has none."""
    call_id = item.get("call_id", item.get("id"))
    if call_id is None:
        return f"call_{uuid4().hex[:24]}"
    if not isinstance(call_id, str) or not call_id:
        raise OperationError(f"{where}: 'call_id' must be non-empty text, got {call_id!r}")
    return call_id


def _arguments(where: str, arguments: object) -> dict[str, Any]:
    """A request's ``arguments``: an object of named arguments, or JSON text of one."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        text = arguments
        try:
            arguments = json.loads(text) if text.strip() else {}
        except ValueError:
            raise OperationError(
                f"{where}: 'arguments' is text but not JSON: {text[:80]!r}"
            ) from None
    if not isinstance(arguments, Mapping):
        raise OperationError(
            f"{where}: 'arguments' must be an object of named arguments, got "
            f"{type(arguments).__name__}"
        )
    return dict(arguments)


@dataclass(frozen=True, slots=True)
class _Outcome:
    response: ActionResponse
    error: Exception | None


async def _run_batch(
    branch: Branch,
    scope: TurnScope | None,
    requests: list[ActionRequest],
    strategy: ActionStrategy,
    suppress_errors: bool,
    record: bool,
) -> list[ActionResponse]:
    if scope is not None:
        await control_point(scope)
    if record:
        _record_requests(branch, requests)
    outcomes: list[_Outcome | None] = [None] * len(requests)
    turn_id = None if scope is None else scope.turn_id
    try:
        await _run_calls(
            branch,
            requests,
            outcomes,
            turn_id,
            sequential=strategy == "sequential",
            stop_on_error=not suppress_errors,
        )
    finally:
        # Also when cancelled mid-batch: the calls that finished are recorded, the others get
        # nothing.
        finished = [o for o in outcomes if o is not None]
        if record:
            branch.msgs.extend([o.response for o in finished])
    if not suppress_errors:
        _raise_first_error(finished)
    return [o.response for o in finished]


def _raise_first_error(outcomes: list[_Outcome]) -> None:
    """Raise the first failure, in request order, of a batch that does not suppress them."""
    for outcome in outcomes:
        if outcome.error is not None:
            raise outcome.error


async def _run_calls(
    branch: Branch,
    requests: list[ActionRequest],
    outcomes: list[_Outcome | None],
    turn_id: UUID | None,
    *,
    sequential: bool,
    stop_on_error: bool,
) -> None:
    """Run the calls into ``outcomes``: in order (stopping at the first error when asked) or
    all at once in a task group."""

    async def run_one(index: int) -> None:
        outcomes[index] = await _call(branch, requests[index], turn_id)

    if not sequential:
        async with anyio.create_task_group() as group:
            for index in range(len(requests)):
                group.start_soon(run_one, index)
        return
    for index in range(len(requests)):
        await run_one(index)
        outcome = outcomes[index]
        if stop_on_error and outcome is not None and outcome.error is not None:
            return


def _record_requests(branch: Branch, requests: list[ActionRequest]) -> None:
    new: list[ActionRequest] = []
    for request in requests:
        if request not in branch.msgs and all(request.id != r.id for r in new):
            new.append(request)
    if new:
        branch.msgs.extend(new)


async def _call(branch: Branch, request: ActionRequest, turn_id: UUID | None) -> _Outcome:
    """One call, traced when a tracer is installed and recorded in the Branch's logs. Never
    raises an ``Exception``; cancellation and other ``BaseException`` propagate (and a
    cancelled call is not logged: it has no response)."""
    started = time.perf_counter()
    outcome = await _instrument.tool_call(
        request, lambda: _run_call(branch, request, turn_id), _response_of
    )
    branch.logs.append(
        Log.tool_call(
            request,
            outcome.response,
            branch_id=branch.id,
            turn_id=turn_id,
            duration_ms=(time.perf_counter() - started) * 1000.0,
        )
    )
    return outcome


def _response_of(outcome: _Outcome) -> ActionResponse:
    return outcome.response


async def _run_call(branch: Branch, request: ActionRequest, turn_id: UUID | None) -> _Outcome:
    """Authorize, look up, validate and run, convert the output."""
    try:
        await _authorize(branch, request)
        tool = branch.tools.get(request.function)
        # escaped where it enters: a surrogateescape file name must not kill the history
        output: JsonValue = clean_json(jsonable(await tool.call(request.arguments)))
    except Exception as exc:
        error: Exception = exc
        if not isinstance(exc, ToolError):
            error = ActionError(
                f"tool {request.function!r} (call {request.call_id}) raised "
                f"{type(exc).__name__}: {exc}"
            )
            error.__cause__ = exc
        await _report_failure(branch, request, turn_id, exc)
        failed = ActionResponse(
            request_id=request.id,
            call_id=request.call_id,
            function=request.function,
            output={"error": clean_text(f"{type(exc).__name__}: {exc}")},
            is_error=True,
            error_type=type(exc).__name__,
            error_message=clean_text(str(exc)),
        )
        return _Outcome(failed, error)
    response = ActionResponse(
        request_id=request.id,
        call_id=request.call_id,
        function=request.function,
        output=output,
    )
    return _Outcome(response, None)


async def _report_failure(
    branch: Branch, request: ActionRequest, turn_id: UUID | None, exc: Exception
) -> None:
    """Tell the developer: a log record with the traceback and the call's identity, then a
    :class:`ToolFailed` signal. The model only ever sees the concise error result."""
    logger.log(
        logging.INFO if isinstance(exc, _CALL_ERRORS) else logging.WARNING,
        "tool %r (call %s) failed on branch %s, turn %s: %s: %s",
        request.function,
        request.call_id,
        branch.id,
        turn_id,
        type(exc).__name__,
        exc,
        exc_info=exc,
        extra={
            "lionagi_branch_id": str(branch.id),
            "lionagi_turn_id": None if turn_id is None else str(turn_id),
            "lionagi_tool": request.function,
            "lionagi_call_id": request.call_id,
        },
    )
    observer = branch.observer
    if observer is not None and observer.wants(ToolFailed):
        await observer.emit(
            ToolFailed(
                branch_id=branch.id,
                turn_id=turn_id,
                request_id=request.id,
                call_id=request.call_id,
                function=request.function,
                error_type=type(exc).__name__,
                error_message=clean_text(str(exc)),
                data=exc,
            )
        )


async def _authorize(branch: Branch, request: ActionRequest) -> None:
    observer = branch.observer
    if observer is None:
        return
    try:
        allowed = await observer.authorize(branch, request)
    except Exception as exc:  # a failing gate refuses: fail closed
        raise UnauthorizedActionError(
            f"tool call {request.function!r} (call {request.call_id}) is not authorized: the "
            f"session's authorize gate raised {type(exc).__name__}: {exc}"
        ) from exc
    if not allowed:
        raise UnauthorizedActionError(
            f"tool call {request.function!r} (call {request.call_id}) is not authorized by the "
            "session's authorize gate"
        )
