"""The public surface, pinned: ``lionagi.__all__`` and each public module's exports.

A change here is a change of the public API: make it deliberately (and say so in the docs).
"""

from __future__ import annotations

import importlib

import pytest

EXPORTS: dict[str, list[str]] = {
    "lionagi": [
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
        "RetryPolicy",
        "RunEnd",
        "RunFailed",
        "RunStart",
        "ServerError",
        "Session",
        "Signal",
        "StopStream",
        "System",
        "TaskHandle",
        "TokenCounter",
        "Tool",
        "ToolArgumentError",
        "ToolCall",
        "ToolError",
        "ToolFailed",
        "ToolNotFoundError",
        "ToolRegistry",
        "ToolSpec",
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
    ],
    "lionagi.errors": [
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
    ],
    "lionagi.service.errors": [
        "AuthenticationError",
        "BadRequestError",
        "ProtocolError",
        "ProviderConnectionError",
        "ProviderError",
        "ProviderTimeout",
        "RateLimitError",
        "RateLimitQueueFull",
        "ServerError",
        "UnknownProviderError",
    ],
    "lionagi.testing": [
        "FunctionModel",
        "FunctionProvider",
        "Recorder",
        "Reply",
        "ScriptExhaustedError",
        "ScriptedProvider",
        "TestModel",
        "VirtualClock",
        "assert_one_terminal_per_start",
        "schema_example",
    ],
    "lionagi.operations.params": [
        "ActParams",
        "ActionStrategy",
        "ChatParams",
        "CommunicateParams",
        "HandleValidation",
        "Instruct",
        "InterpretParams",
        "ModelOptions",
        "NoOptions",
        "OPERATION_PARAMS",
        "OperateParams",
        "OperationParams",
        "ParseParams",
        "ReActParams",
        "RunParams",
        "ToolsArg",
        "bind",
        "known_names",
        "request_options",
    ],
    "lionagi.protocols.tokens": [
        "ApproxTokenCounter",
        "TokenCounter",
        "get_default_counter",
        "set_default_counter",
    ],
}


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_exports_are_pinned(module: str) -> None:
    assert sorted(importlib.import_module(module).__all__) == EXPORTS[module]


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_every_export_exists(module: str) -> None:
    loaded = importlib.import_module(module)
    missing = [name for name in EXPORTS[module] if not hasattr(loaded, name)]
    assert missing == []


def test_top_level_errors_are_the_error_modules_classes() -> None:
    import lionagi
    from lionagi import errors
    from lionagi.service import errors as service_errors

    for source in (errors, service_errors):
        for name in source.__all__:
            if name in lionagi.__all__:
                assert getattr(lionagi, name) is getattr(source, name)
