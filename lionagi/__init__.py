"""lionagi: LLM conversations as structured-concurrency turns, on asyncio and trio.

A :class:`Branch` holds one conversation. Each model-invoking operation on it (``chat``,
``communicate``, ``operate``, ``ReAct``, ``run``, ...) is one *turn*: turns on one Branch queue
in arrival order, each owns its nested work and signals, and each ends with exactly one
``RunEnd`` or ``RunFailed`` carrying its ``turn_id``.
"""

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
from lionagi.ln import alcall, bcall
from lionagi.operations.builder import Builder, ExpansionStrategy, OperationGraphBuilder
from lionagi.operations.events import (
    MessageCommitted,
    PartialObjectEvent,
    ResultEvent,
    StreamEvent,
    TextDeltaEvent,
    ToolCallDeltaEvent,
    ToolFinished,
    ToolStarted,
)
from lionagi.operations.fields import FieldModel
from lionagi.operations.graph import OperationGraph, OperationNode, ResultCondition
from lionagi.operations.params import Instruct, ModelOptions
from lionagi.operations.turn import DriverState, TurnStream
from lionagi.operations.types import TaskHandle, TurnExecutionContext, TurnScope
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
from lionagi.protocols.tokens import TokenCounter, set_default_counter
from lionagi.protocols.tool_spec import ToolSpec
from lionagi.protocols.tools import Tool, ToolRegistry
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
from lionagi.service.imodel import iModel
from lionagi.service.retry import RetryPolicy
from lionagi.service.types import ModelResponse
from lionagi.service.usage_limits import UsageLimits
from lionagi.session.branch import Branch
from lionagi.session.control import LoopBreak, LoopControl, LoopDirective, StopStream
from lionagi.session.flow import FlowEvent, FlowStream
from lionagi.session.logs import LogManager
from lionagi.session.session import Session
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
