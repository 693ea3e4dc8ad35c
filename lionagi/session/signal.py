"""Signals: what observers are told about a Branch.

Lifecycle signals (:class:`RunStart`, :class:`RunEnd`, :class:`RunFailed`) carry the ``turn_id``
of the top-level turn they describe, and the ``op_id`` of the flow node that turn runs (None
outside a flow); :class:`MessageAdded` carries the ``turn_id`` when the message was recorded
inside a live turn. Flow signals (:class:`FlowStart`, :class:`NodeStart`, :class:`NodeEnd`,
:class:`NodeFailed`, :class:`NodeSkipped`, :class:`FlowEnd`) describe a
:meth:`~lionagi.session.session.Session.flow`. UUIDs serialize to their string form.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Annotated, Any, Literal, TypeAlias
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from lionagi.protocols.messages import Message, Usage

__all__ = [
    "SIGNAL_SCHEMA_VERSION",
    "FlowEnd",
    "FlowSignal",
    "FlowStart",
    "MessageAdded",
    "ModelRetry",
    "NodeEnd",
    "NodeFailed",
    "NodeSignal",
    "NodeSkipped",
    "NodeStart",
    "RunEnd",
    "RunFailed",
    "RunSignal",
    "RunStart",
    "Signal",
    "ToolFailed",
    "build_run_end",
    "current_op_id",
]

#: Bumped only for incompatible changes; additive nullable fields (like ``turn_id``) keep it.
SIGNAL_SCHEMA_VERSION = 1

#: The flow node the current task runs, read by the turn driver when it builds lifecycle
#: signals. Set only by the flow executor, in the node's own task.
current_op_id: ContextVar[str | None] = ContextVar("lionagi_current_op_id", default=None)


def _error_text(error: BaseException | None) -> str | None:
    """An exception as ``"Type: message"`` for a signal's JSON form (no traceback)."""
    return None if error is None else f"{type(error).__name__}: {error}"


#: a signal's exception field: the exception itself, dumped as :func:`_error_text`
_Error: TypeAlias = Annotated[BaseException | None, PlainSerializer(_error_text)]


class Signal(BaseModel):
    """Base of every signal: the Branch it concerns and when it was raised."""

    # Built on first use: without an observer no signal is ever made, so import pays nothing.
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, defer_build=True)

    branch_id: UUID | None = None
    created_at: float = Field(default_factory=time.time)

    @property
    def kind(self) -> str:
        return type(self).__name__


class RunSignal(Signal):
    """Base of the lifecycle signals of one top-level turn: the turn, the operation it runs,
    and the flow node it runs for (None outside a flow)."""

    turn_id: UUID | None = None
    operation: str | None = None
    op_id: str | None = None


class RunStart(RunSignal):
    """A top-level turn acquired its Branch and is about to run."""


class RunEnd(RunSignal):
    """A top-level turn finished: returned, ended its stream, or was closed by its consumer."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_cost_usd: float = 0.0
    num_turns: int = 0
    #: requests sent by the turn's model calls, retried attempts included
    attempts: int = 0
    duration_ms: float = 0.0


class RunFailed(RunSignal):
    """A top-level turn ended with an exception or a cancellation (``data`` holds it)."""

    data: _Error = None
    duration_ms: float = 0.0


class ToolFailed(Signal):
    """A tool call failed: refused, unknown tool, invalid arguments, the tool raised or timed
    out, or its output could not be serialized. ``data`` holds the exception (with its
    traceback); ``turn_id`` is the turn the call ran in, ``None`` for ``act`` outside a turn.
    Raised before the error :class:`~lionagi.protocols.messages.ActionResponse` is recorded."""

    turn_id: UUID | None = None
    request_id: UUID | None = None
    call_id: str = ""
    function: str = ""
    error_type: str = ""
    error_message: str = ""
    data: _Error = None


class ModelRetry(Signal):
    """A model call failed with a retryable error and will be sent again after ``wait`` seconds.

    ``attempt`` is the failed attempt (1-based); ``error`` says what happened (its type and
    message; secrets were scrubbed by the provider). The turn's ``RunEnd.attempts`` counts every
    attempt its model calls made.
    """

    turn_id: UUID | None = None
    attempt: int
    wait: float
    error: str
    status: int | None = None
    provider: str | None = None
    model: str | None = None


class MessageAdded(Signal):
    """A message was appended to the Branch history."""

    message: Message
    turn_id: UUID | None = None


def build_run_end(
    branch: Any,
    *,
    turn_id: UUID | None = None,
    duration_ms: float = 0.0,
    result: Any = None,
    usage: Usage | None = None,
    num_turns: int = 0,
    attempts: int | None = None,
    operation: str | None = None,
    op_id: str | None = None,
) -> RunEnd:
    """The :class:`RunEnd` for a finished turn of ``branch``.

    ``usage`` is what the turn's model calls reported; without it, a ``result`` that carries a
    ``usage`` attribute is used. ``num_turns`` counts model calls and ``attempts`` the requests
    they sent (``num_turns`` when not given).
    """
    if usage is None:
        candidate = getattr(result, "usage", None)
        usage = candidate if isinstance(candidate, Usage) else Usage()
    return RunEnd(
        branch_id=getattr(branch, "id", None),
        turn_id=turn_id,
        operation=operation,
        op_id=op_id,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_cost_usd=usage.cost_usd or 0.0,
        num_turns=num_turns,
        attempts=num_turns if attempts is None else attempts,
        duration_ms=duration_ms,
    )


# -- flow signals -------------------------------------------------------------------------------
class FlowSignal(Signal):
    """Base of the signals of one :meth:`~lionagi.session.session.Session.flow` run."""

    flow_id: UUID


class FlowStart(FlowSignal):
    """A flow validated its graph and is about to start its first node."""

    node_count: int = 0


class NodeSignal(FlowSignal):
    """Base of the signals about one node: ``op_id`` is the node id, ``name`` its reference."""

    op_id: str
    name: str | None = None


class NodeStart(NodeSignal):
    """A node's dependencies are met and it is about to run its turn on ``branch_id``."""


class NodeEnd(NodeSignal):
    """A node's turn returned; ``turn_id`` is that turn."""

    turn_id: UUID | None = None
    duration_ms: float = 0.0


class NodeFailed(NodeSignal):
    """A node's turn raised or was cancelled (``data`` holds the exception)."""

    turn_id: UUID | None = None
    data: _Error = None
    duration_ms: float = 0.0


class NodeSkipped(NodeSignal):
    """A node did not run: a dependency failed or was skipped, or no edge condition held."""

    reason: str = ""


class FlowEnd(FlowSignal):
    """A flow ended: every node it started has finished (``status`` says how the flow ended)."""

    status: Literal["completed", "failed", "cancelled"] = "completed"
    completed: int = 0
    failed: int = 0
    skipped: int = 0
    cancelled: int = 0
    duration_ms: float = 0.0
