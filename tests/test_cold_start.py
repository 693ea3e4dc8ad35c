"""Cold start: ``import lionagi`` loads only what a first chat turn needs.

Each check runs in a fresh interpreter (a subprocess this test controls), since the test
process itself has long imported everything. Timing is the ``cold`` benchmark's business; these
tests pin what is loaded and what is built at import.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: what neither ``import lionagi`` nor a first chat turn loads: tool-schema and JSON-repair
#: libraries, HTTP, the retry loop, and the operations a plain chat does not run
DEFERRED = (
    "docstring_parser",
    "json_repair",
    "httpx",
    "tenacity",
    "lionagi.mcp",
    "lionagi.operations.builder",
    "lionagi.operations.graph",
    "lionagi.operations.live",
    "lionagi.operations.operate",
    "lionagi.operations.react",
    "lionagi.operations.results",
    "lionagi.session.flow",
    "lionagi.session.session",
)

PROBE = """
import json, sys
import lionagi
from lionagi.protocols.messages import ActionRequest, ActionResponse
from lionagi.service.types import FinalChunk, TextDelta
from lionagi.session.signal import _ADAPTERS, MessageAdded, RunEnd, RunStart
imported = sorted(m for m in {deferred!r} if m in sys.modules)
built = {{c.__name__: c.__pydantic_complete__ for c in (
    ActionRequest, ActionResponse, FinalChunk, TextDelta)}}
built.update({{c.__name__: c in _ADAPTERS for c in (MessageAdded, RunEnd, RunStart)}})

import anyio
from lionagi.testing import FunctionModel

async def turn():
    branch = lionagi.Branch(system="s", chat_model=FunctionModel(lambda m, **o: "ok"))
    await branch.chat_and_record("hi")
    return branch

branch = anyio.run(turn)
after_turn = sorted(m for m in {deferred!r} if m in sys.modules)
data = {{k: v for k, v in branch.to_dict().items() if not k.endswith("model")}}
restored = lionagi.Branch.from_dict(data)
print(json.dumps({{"imported": imported, "built": built, "after_turn": after_turn,
                  "restored": len(restored.msgs)}}))
"""


def _probe(source: str | None = None) -> dict[str, object]:
    """Run ``source`` (by default :data:`PROBE`) in a fresh interpreter; its last JSON line."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(deferred=DEFERRED) if source is None else source],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def test_import_and_a_first_chat_turn_load_none_of_the_deferred_modules() -> None:
    answer = _probe()
    assert answer["imported"] == []
    assert answer["after_turn"] == []
    assert answer["restored"] == 3  # the deferred serialization model builds on first use


def test_signal_stream_and_tool_message_models_are_built_on_first_use() -> None:
    built = _probe()["built"]
    assert built == dict.fromkeys(
        (
            "ActionRequest",
            "ActionResponse",
            "FinalChunk",
            "TextDelta",
            "MessageAdded",
            "RunEnd",
            "RunStart",
        ),
        False,
    )


OBSERVED_PROBE = """
import json
import anyio
from lionagi import Session, Signal
from lionagi.session.signal import _ADAPTERS
from lionagi.testing import FunctionModel

async def turn():
    seen = []
    session = Session()
    session.observe(Signal, lambda signal, _: seen.append(signal.kind))
    branch = session.new_branch(system="s", chat_model=FunctionModel(lambda m, **o: "ok"))
    await branch.chat_and_record("hi")
    return seen

seen = anyio.run(turn)
print(json.dumps({"seen": seen, "built": sorted(c.__name__ for c in _ADAPTERS)}))
"""


def test_an_observed_turn_builds_its_signals_without_building_a_signal_validator() -> None:
    answer = _probe(OBSERVED_PROBE)
    assert answer["seen"] == ["RunStart", "MessageAdded", "MessageAdded", "RunEnd"]
    assert answer["built"] == []


LAZY_PROBE = """
import json, sys
import lionagi
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("lionagi", "pydantic", "anyio"))
bound_at_import = sorted(n for n in lionagi.__all__ if n in vars(lionagi))
listed = sorted(set(lionagi.__all__) - set(dir(lionagi)))
namespace = {}
exec("from lionagi import *", namespace)
star = sorted(n for n in namespace if n != "__builtins__")
import importlib
wrong = [n for n, m in lionagi._LAZY.items()
         if getattr(lionagi, n) is not getattr(importlib.import_module(m), n)]
try:
    lionagi.NoSuchName
except AttributeError as exc:
    missing = str(exc)
print(json.dumps({"loaded": loaded, "bound": bound_at_import, "not_listed": listed,
                  "star": star, "wrong": wrong, "missing": missing,
                  "all": sorted(lionagi.__all__)}))
"""


def test_import_lionagi_loads_only_the_exception_modules() -> None:
    answer = _probe(LAZY_PROBE)
    assert answer["loaded"] == [
        "lionagi",
        "lionagi.errors",
        "lionagi.service",
        "lionagi.service.errors",
    ]
    from lionagi import errors
    from lionagi.service import errors as service_errors

    exceptions = {*errors.__all__, *service_errors.__all__}
    bound = answer["bound"]
    assert isinstance(bound, list)
    assert set(bound) <= exceptions | {"__version__"}
    assert "Branch" not in bound


def test_every_public_name_resolves_lazily_to_its_modules_object() -> None:
    answer = _probe(LAZY_PROBE)
    assert answer["wrong"] == []
    assert answer["not_listed"] == []
    assert answer["star"] == answer["all"]
    assert answer["missing"] == "module 'lionagi' has no attribute 'NoSuchName'"
