"""The exception tree of lionagi: every exception the library defines, in one module.

Every public failure is one of these, with a message that names the bad value and what to do.
Catch :class:`LionError` for "anything lionagi refused or failed at"; each class also derives
from the builtin a Python programmer would expect (``ValueError``, ``TypeError``, ``KeyError``,
...), so ``except ValueError`` keeps working too. Provider failures are defined beside the
transports that raise them, in :mod:`lionagi.service.errors`, and belong to this tree::

    LionError
    ├── ConfigurationError (ValueError)       a constructor or setting got an unusable value
    │   └── DuplicateProviderError              a context provider name is taken
    ├── OperationError (ValueError)           an operation argument is of the wrong type or value
    ├── UnknownParameterError (TypeError)     an operation got a keyword it does not take
    ├── ParseError (ValueError)               text did not parse into the response_format
    ├── HistoryError (ValueError)             a message the history cannot take
    ├── ToolError
    │   ├── DuplicateToolError (ValueError)
    │   ├── ToolNotFoundError (KeyError)
    │   ├── ToolArgumentError (ValueError)
    │   ├── ActionError                         a tool raised and errors were not suppressed
    │   ├── ToolTimeoutError (TimeoutError)
    │   ├── UnauthorizedActionError (PermissionError)
    │   └── McpError                            an MCP tool server failed
    ├── ProviderNotFoundError (KeyError)      no context provider by that name
    ├── BranchNotFoundError (KeyError)        no branch by that id or name in a Session
    ├── FlowError (RuntimeError)              an operation graph or flow misused
    │   └── GraphCycleError (ValueError)
    ├── UsageLimitExceeded                    a turn's next model call would break its limits
    ├── LoopBreak                             a BREAK directive stopped the turn (RunFailed)
    ├── TurnFinalizingError (RuntimeError)    a call joined a turn that is already finalizing
    ├── ScriptExhaustedError                  a lionagi.testing TestModel ran out of replies
    ├── MissingDependencyError (ImportError)  an optional extra is not installed
    ├── StoreError                            the conversation store could not read or write
    ├── UnknownProviderError (ValueError)     lionagi.service.errors: no such provider name
    ├── RateLimitQueueFull                    lionagi.service.errors: too many calls waiting
    └── ProviderError                         lionagi.service.errors: the model provider failed
        ├── AuthenticationError
        ├── RateLimitError
        ├── BadRequestError
        ├── ServerError
        ├── ProtocolError
        │   └── ProviderConnectionError         connection refused, reset, or no DNS answer
        └── ProviderTimeout (TimeoutError)

    StopStream (Exception)                    a CANCEL directive ended the turn cleanly (RunEnd)

``StopStream`` is deliberately outside ``LionError``: a CANCEL is a stop the caller asked for
and its turn ends with ``RunEnd``, like ``StopAsyncIteration`` ends an iteration, so
``except LionError`` (failure handling) does not catch it. ``LoopBreak`` is a failure (its turn
ends with ``RunFailed``) and is a ``LionError``. Cancellation by anyio is never converted into
any of these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lionagi.session.control import LoopControl

__all__ = [
    "ActionError",
    "BranchNotFoundError",
    "ConfigurationError",
    "DuplicateProviderError",
    "DuplicateToolError",
    "FlowError",
    "GraphCycleError",
    "HistoryError",
    "LionError",
    "LoopBreak",
    "McpError",
    "MissingDependencyError",
    "OperationError",
    "ParseError",
    "ProviderNotFoundError",
    "ScriptExhaustedError",
    "StopStream",
    "StoreError",
    "ToolArgumentError",
    "ToolError",
    "ToolNotFoundError",
    "ToolTimeoutError",
    "TurnFinalizingError",
    "UnauthorizedActionError",
    "UnknownParameterError",
    "UsageLimitExceeded",
]


def _rebuilt(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    """``cls`` with the stored ``args`` and attributes, made without calling its constructor
    (which takes other arguments than the ``args`` it stores): how the tree unpickles."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


def _reduce(self: BaseException) -> tuple[Any, ...]:
    return (_rebuilt, (type(self), self.args, self.__dict__))


class LionError(Exception):
    """Base class of every exception raised by lionagi itself. Every one pickles and copies
    (across processes, ``copy.copy``) with its message and attributes."""

    __reduce__ = _reduce


class ConfigurationError(LionError, ValueError):
    """A constructor or call received a value it cannot use (unknown provider, bad URL, ...)."""


class OperationError(LionError, ValueError):
    """An operation argument has the wrong type or value, or arguments cannot work together."""


class DuplicateProviderError(ConfigurationError):
    """A context provider with this name is already registered."""


class HistoryError(LionError, ValueError):
    """The history cannot take a message: it is not a :class:`Message`, or it is already
    recorded (the history is append-only and holds each message once)."""


class UnknownParameterError(LionError, TypeError):
    """An operation got a keyword argument it does not take.

    The message names the keyword and, for a name upstream lionagi accepted, what to use
    instead. ``operation`` and ``name`` say where and what.
    """

    def __init__(self, message: str, *, operation: str, name: str) -> None:
        super().__init__(message)
        self.operation = operation
        self.name = name


class ToolError(LionError):
    """Base class of tool registration and invocation failures."""


class DuplicateToolError(ToolError, ValueError):
    """A tool name is already registered; pass ``update=True`` to replace it."""


class _NotFound(KeyError):
    """A ``KeyError`` whose ``str()`` is its message (a bare ``KeyError`` would ``repr()`` it);
    ``_default_message`` is what it says without one."""

    _default_message = "not found"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else self._default_message


class ToolNotFoundError(ToolError, _NotFound):
    """A model or caller asked for a tool name that is not registered."""

    _default_message = "tool not found"


class ToolArgumentError(ToolError, ValueError):
    """Tool arguments failed validation before the call."""

    def __init__(self, tool: str, field: str, message: str) -> None:
        super().__init__(f"tool {tool!r}: argument {field!r}: {message}")
        self.tool = tool
        self.field = field


class ActionError(ToolError):
    """A tool raised while running and the caller asked for errors to propagate."""


class ToolTimeoutError(ToolError, TimeoutError):
    """A tool did not finish within its ``timeout``."""


class UnauthorizedActionError(ToolError, PermissionError):
    """The session's ``authorize`` gate refused a tool call."""


class McpError(ToolError):
    """An MCP server failed: it could not be reached or started, broke the protocol, refused
    a request, or went away while a call was in flight."""


class ParseError(LionError, ValueError):
    """Text could not be turned into the requested ``response_format``."""

    def __init__(self, schema: str, detail: str, text: str | None = None) -> None:
        shown = "" if text is None else f"; text began {text[:80]!r}"
        super().__init__(
            f"could not parse into {schema}: {detail}{shown} (handle_validation='raise' is the "
            "default; upstream lionagi returned the text instead: pass "
            "handle_validation='return_value' for that, or 'return_none')"
        )
        self.schema = schema
        self.detail = detail
        self.text = text


class BranchNotFoundError(LionError, _NotFound):
    """A Session has no branch with the given id or name."""

    _default_message = "branch not found"


class FlowError(LionError, RuntimeError):
    """An operation graph or flow was used in a way that cannot work (see the message)."""


class GraphCycleError(FlowError, ValueError):
    """An operation graph has a dependency cycle; ``cycle`` lists its node names in order."""

    def __init__(self, cycle: list[str]) -> None:
        shown = " -> ".join([*cycle, cycle[0]]) if cycle else "(empty)"
        super().__init__(
            f"operation graph has a dependency cycle: {shown}; remove one of these "
            "dependencies so the graph is acyclic"
        )
        self.cycle = cycle


class UsageLimitExceeded(LionError):
    """A turn's next model call would break one of its ``UsageLimits``; it was not sent.

    ``limit`` names the limit (``"request_limit"``, ``"total_tokens_limit"``, ...), ``value`` is
    its setting and ``used`` what the turn would reach (requests) or has reached (tokens).
    """

    def __init__(self, limit: str, value: int, used: int) -> None:
        requests = limit == "request_limit"
        unit = "requests" if requests else limit.removesuffix("_limit").replace("_", " ")
        reach = "would make" if requests else "has used"
        super().__init__(
            f"usage limit exceeded: {limit}={value}, and this turn {reach} {used} {unit}; "
            f"raise UsageLimits({limit}=...) or give the turn less to do"
        )
        self.limit = limit
        self.value = value
        self.used = used


class ProviderNotFoundError(LionError, _NotFound):
    """No context provider with this name is registered."""

    _default_message = "context provider not found"


class ScriptExhaustedError(LionError):
    """A :class:`~lionagi.testing.TestModel` was called more times than it has scripted
    responses."""


class LoopBreak(LionError):
    """A BREAK directive stopped the turn. The turn ends with ``RunFailed``."""

    def __init__(self, control: LoopControl) -> None:
        why = f": {control.reason}" if control.reason else ""
        super().__init__(f"turn {control.turn_id} stopped by a BREAK directive{why}")
        self.control = control


class TurnFinalizingError(LionError, RuntimeError):
    """A task inherited this Branch's turn binding after finalization began.

    Raised instead of waiting for the lock the caller's own task lineage is releasing (which
    would deadlock), e.g. when a terminal observer handler calls the Branch again. Schedule the
    work to run after the turn ends, or catch this and retry.
    """


class StopStream(Exception):
    """A CANCEL directive ended the turn cleanly. The turn ends with ``RunEnd``; a stream
    simply stops, a coroutine operation re-raises this so its caller knows there is no result.

    Not a :class:`LionError`: the caller asked for the stop, so failure handling
    (``except LionError``) does not catch it."""

    def __init__(self, control: LoopControl | None = None, reason: str | None = None) -> None:
        why = reason or (control.reason if control else None)
        super().__init__("stream stopped" + (f": {why}" if why else ""))
        self.control = control

    __reduce__ = _reduce


class MissingDependencyError(LionError, ImportError):
    """A feature needs an optional dependency that is not installed; the message names the
    extra to install (``pip install 'lionagi[pandas]'``)."""


class StoreError(LionError):
    """The conversation store (:mod:`lionagi.store`) could not read or write; the message
    names the file and the cause."""
