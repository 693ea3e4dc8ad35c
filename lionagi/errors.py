"""The exception tree of lionagi.

Every public failure is one of these, with a message that names the bad value and what to do.
Provider failures live in :mod:`lionagi.service.errors` and derive from :class:`LionError` too.
"""

from __future__ import annotations

__all__ = [
    "ActionError",
    "BranchNotFoundError",
    "ConfigurationError",
    "DuplicateToolError",
    "FlowError",
    "GraphCycleError",
    "LionError",
    "McpError",
    "OperationError",
    "ParseError",
    "ToolArgumentError",
    "ToolError",
    "ToolNotFoundError",
    "ToolTimeoutError",
    "UnauthorizedActionError",
    "UnknownParameterError",
    "UsageLimitExceeded",
]


class LionError(Exception):
    """Base class of every exception raised by lionagi itself."""


class ConfigurationError(LionError, ValueError):
    """A constructor or call received a value it cannot use (unknown provider, bad URL, ...)."""


class OperationError(LionError, ValueError):
    """An operation was called with parameters that cannot work together."""


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


class ToolNotFoundError(ToolError, KeyError):
    """A model or caller asked for a tool name that is not registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "tool not found"


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


class BranchNotFoundError(LionError, KeyError):
    """A Session has no branch with the given id or name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "branch not found"


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
