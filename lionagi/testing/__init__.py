"""Offline models for your own tests, demos and benchmarks -- no network, deterministic.

``TestModel`` answers from a script (or with schema-valid JSON); ``FunctionModel`` answers by
calling your function. Both are full :class:`~lionagi.service.imodel.iModel` objects.
"""

from lionagi.testing._function import FunctionModel, FunctionProvider
from lionagi.testing._offline import Reply
from lionagi.testing._schema import schema_example
from lionagi.testing._scripted import ScriptedProvider, ScriptExhaustedError, TestModel

__all__ = [
    "FunctionModel",
    "FunctionProvider",
    "Reply",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "TestModel",
    "schema_example",
]
