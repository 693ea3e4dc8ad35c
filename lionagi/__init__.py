"""lionagi: LLM conversations as structured-concurrency turns, on asyncio and trio.

A :class:`Branch` holds one conversation. Each model-invoking operation on it (``chat``,
``communicate``, ``operate``, ``ReAct``, ``run``, ...) is one *turn*: turns on one Branch queue
in arrival order, each owns its nested work and signals, and each ends with exactly one
``RunEnd`` or ``RunFailed`` carrying its ``turn_id``.

Importing the package binds only the exception classes. Every other public name is imported
on first use (``lionagi.Branch``, ``from lionagi import Branch``), so a program loads only
the parts it uses. Type checkers and IDEs see ordinary imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lionagi.errors import (
    ActionError,
    BranchNotFoundError,
    ConfigurationError,
    DuplicateProviderError,
    DuplicateToolError,
    FlowError,
    GraphCycleError,
    HistoryError,
    LionError,
    MissingDependencyError,
    OperationError,
    ParseError,
    ProviderNotFoundError,
    ToolArgumentError,
    ToolError,
    ToolNotFoundError,
    ToolTimeoutError,
    TurnFinalizingError,
    UnauthorizedActionError,
    UnknownParameterError,
    UsageLimitExceeded,
)
from lionagi.service.errors import (
    AuthenticationError,
    BadRequestError,
    ProtocolError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    RateLimitQueueFull,
    ServerError,
    UnknownProviderError,
)

if TYPE_CHECKING:
    from lionagi.ln import (
        alcall,
        bcall,
    )
    from lionagi.operations.builder import (
        Builder,
        ExpansionStrategy,
        OperationGraphBuilder,
    )
    from lionagi.operations.events import (
        MessageCommitted,
        PartialObjectEvent,
        ReasoningDeltaEvent,
        ResultEvent,
        StreamEvent,
        TextDeltaEvent,
        ToolCallDeltaEvent,
        ToolFinished,
        ToolStarted,
    )
    from lionagi.operations.fields import (
        FieldModel,
    )
    from lionagi.operations.graph import (
        OperationGraph,
        OperationNode,
        ResultCondition,
    )
    from lionagi.operations.params import (
        Instruct,
        ModelOptions,
    )
    from lionagi.operations.turn import (
        DriverState,
        TurnStream,
    )
    from lionagi.operations.types import (
        TaskHandle,
        TurnExecutionContext,
        TurnScope,
    )
    from lionagi.protocols.context_providers import (
        ContextProvider,
        ContextProviderRegistry,
        ProviderReport,
    )
    from lionagi.protocols.messages import (
        ActionRequest,
        ActionResponse,
        AssistantResponse,
        Instruction,
        Message,
        MessageManager,
        Reasoning,
        System,
        ToolCall,
        Usage,
    )
    from lionagi.protocols.tokens import (
        TokenCounter,
        set_default_counter,
    )
    from lionagi.protocols.tool_spec import (
        ToolSpec,
    )
    from lionagi.protocols.tools import (
        Tool,
        ToolRegistry,
    )
    from lionagi.service.imodel import (
        iModel,
    )
    from lionagi.service.retry import (
        RetryPolicy,
    )
    from lionagi.service.types import (
        ModelResponse,
    )
    from lionagi.service.usage_limits import (
        UsageLimits,
    )
    from lionagi.session.branch import (
        Branch,
    )
    from lionagi.session.control import (
        LoopBreak,
        LoopControl,
        LoopDirective,
        StopStream,
    )
    from lionagi.session.flow import (
        FlowEvent,
        FlowStream,
    )
    from lionagi.session.logs import (
        LogManager,
    )
    from lionagi.session.session import (
        Session,
    )
    from lionagi.session.signal import (
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
        Signal,
        ToolFailed,
    )

__version__ = "0.1.0"

#: public name -> the module it is imported from on first use
_LAZY: dict[str, str] = {
    "alcall": "lionagi.ln",
    "bcall": "lionagi.ln",
    "Builder": "lionagi.operations.builder",
    "ExpansionStrategy": "lionagi.operations.builder",
    "OperationGraphBuilder": "lionagi.operations.builder",
    "MessageCommitted": "lionagi.operations.events",
    "PartialObjectEvent": "lionagi.operations.events",
    "ReasoningDeltaEvent": "lionagi.operations.events",
    "ResultEvent": "lionagi.operations.events",
    "StreamEvent": "lionagi.operations.events",
    "TextDeltaEvent": "lionagi.operations.events",
    "ToolCallDeltaEvent": "lionagi.operations.events",
    "ToolFinished": "lionagi.operations.events",
    "ToolStarted": "lionagi.operations.events",
    "FieldModel": "lionagi.operations.fields",
    "OperationGraph": "lionagi.operations.graph",
    "OperationNode": "lionagi.operations.graph",
    "ResultCondition": "lionagi.operations.graph",
    "Instruct": "lionagi.operations.params",
    "ModelOptions": "lionagi.operations.params",
    "DriverState": "lionagi.operations.turn",
    "TurnStream": "lionagi.operations.turn",
    "TaskHandle": "lionagi.operations.types",
    "TurnExecutionContext": "lionagi.operations.types",
    "TurnScope": "lionagi.operations.types",
    "ContextProvider": "lionagi.protocols.context_providers",
    "ContextProviderRegistry": "lionagi.protocols.context_providers",
    "ProviderReport": "lionagi.protocols.context_providers",
    "ActionRequest": "lionagi.protocols.messages",
    "ActionResponse": "lionagi.protocols.messages",
    "AssistantResponse": "lionagi.protocols.messages",
    "Instruction": "lionagi.protocols.messages",
    "Message": "lionagi.protocols.messages",
    "MessageManager": "lionagi.protocols.messages",
    "Reasoning": "lionagi.protocols.messages",
    "System": "lionagi.protocols.messages",
    "ToolCall": "lionagi.protocols.messages",
    "Usage": "lionagi.protocols.messages",
    "TokenCounter": "lionagi.protocols.tokens",
    "set_default_counter": "lionagi.protocols.tokens",
    "ToolSpec": "lionagi.protocols.tool_spec",
    "Tool": "lionagi.protocols.tools",
    "ToolRegistry": "lionagi.protocols.tools",
    "iModel": "lionagi.service.imodel",
    "RetryPolicy": "lionagi.service.retry",
    "ModelResponse": "lionagi.service.types",
    "UsageLimits": "lionagi.service.usage_limits",
    "Branch": "lionagi.session.branch",
    "LoopBreak": "lionagi.session.control",
    "LoopControl": "lionagi.session.control",
    "LoopDirective": "lionagi.session.control",
    "StopStream": "lionagi.session.control",
    "FlowEvent": "lionagi.session.flow",
    "FlowStream": "lionagi.session.flow",
    "LogManager": "lionagi.session.logs",
    "Session": "lionagi.session.session",
    "FlowEnd": "lionagi.session.signal",
    "FlowStart": "lionagi.session.signal",
    "MessageAdded": "lionagi.session.signal",
    "ModelRetry": "lionagi.session.signal",
    "NodeEnd": "lionagi.session.signal",
    "NodeFailed": "lionagi.session.signal",
    "NodeSkipped": "lionagi.session.signal",
    "NodeStart": "lionagi.session.signal",
    "RunEnd": "lionagi.session.signal",
    "RunFailed": "lionagi.session.signal",
    "RunStart": "lionagi.session.signal",
    "Signal": "lionagi.session.signal",
    "ToolFailed": "lionagi.session.signal",
}


__all__ = [
    "ActionError",
    "ActionRequest",
    "ActionResponse",
    "AssistantResponse",
    "AuthenticationError",
    "BadRequestError",
    "Branch",
    "BranchNotFoundError",
    "Builder",
    "ConfigurationError",
    "ContextProvider",
    "ContextProviderRegistry",
    "DriverState",
    "DuplicateProviderError",
    "DuplicateToolError",
    "ExpansionStrategy",
    "FieldModel",
    "FlowEnd",
    "FlowError",
    "FlowEvent",
    "FlowStart",
    "FlowStream",
    "GraphCycleError",
    "HistoryError",
    "Instruct",
    "Instruction",
    "LionError",
    "LogManager",
    "LoopBreak",
    "LoopControl",
    "LoopDirective",
    "Message",
    "MessageAdded",
    "MessageCommitted",
    "MessageManager",
    "MissingDependencyError",
    "ModelOptions",
    "ModelResponse",
    "ModelRetry",
    "NodeEnd",
    "NodeFailed",
    "NodeSkipped",
    "NodeStart",
    "OperationError",
    "OperationGraph",
    "OperationGraphBuilder",
    "OperationNode",
    "ParseError",
    "PartialObjectEvent",
    "ProtocolError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderNotFoundError",
    "ProviderReport",
    "ProviderTimeout",
    "RateLimitError",
    "RateLimitQueueFull",
    "Reasoning",
    "ReasoningDeltaEvent",
    "ResultCondition",
    "ResultEvent",
    "RetryPolicy",
    "RunEnd",
    "RunFailed",
    "RunStart",
    "ServerError",
    "Session",
    "Signal",
    "StopStream",
    "StreamEvent",
    "System",
    "TaskHandle",
    "TextDeltaEvent",
    "TokenCounter",
    "Tool",
    "ToolArgumentError",
    "ToolCall",
    "ToolCallDeltaEvent",
    "ToolError",
    "ToolFailed",
    "ToolFinished",
    "ToolNotFoundError",
    "ToolRegistry",
    "ToolSpec",
    "ToolStarted",
    "ToolTimeoutError",
    "TurnExecutionContext",
    "TurnFinalizingError",
    "TurnScope",
    "TurnStream",
    "UnauthorizedActionError",
    "UnknownParameterError",
    "UnknownProviderError",
    "Usage",
    "UsageLimitExceeded",
    "UsageLimits",
    "__version__",
    "alcall",
    "bcall",
    "iModel",
    "set_default_counter",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first access and keep it, so later lookups are plain."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lionagi' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
