"""The offline models under their earlier import path; import them from :mod:`lionagi.testing`."""

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
