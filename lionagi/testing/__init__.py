"""Offline models and signal checks for your own tests, demos and benchmarks.

``TestModel`` answers from a script (or with schema-valid JSON); ``FunctionModel`` answers by
calling your function. Both are full :class:`~lionagi.service.imodel.iModel` objects, with no
network and deterministic. ``Recorder`` records a session's signals and
``assert_one_terminal_per_start`` checks that every started turn ended exactly once.
``VirtualClock`` makes retry and rate-limit waits instant and observable.
"""

from lionagi.testing._clock import VirtualClock
from lionagi.testing._function import FunctionModel, FunctionProvider
from lionagi.testing._offline import Reply
from lionagi.testing._recorder import Recorder, assert_one_terminal_per_start
from lionagi.testing._schema import schema_example
from lionagi.testing._scripted import ScriptedProvider, ScriptExhaustedError, TestModel

__all__ = [
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
]
