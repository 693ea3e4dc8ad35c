"""Offline models for your own tests, demos and benchmarks -- no network, deterministic.

``TestModel`` answers from a script (or with schema-valid JSON); ``FunctionModel`` answers by
calling your function. Both are full :class:`~lionagi.service.imodel.iModel` objects.
"""

from lionagi.testing.models import (
    FunctionModel,
    FunctionProvider,
    Reply,
    ScriptedProvider,
    ScriptExhaustedError,
    TestModel,
    schema_example,
)

__all__ = [
    "FunctionModel",
    "FunctionProvider",
    "Reply",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "TestModel",
    "schema_example",
]
