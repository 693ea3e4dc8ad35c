"""One cold-start sample for ``benchmarks.cold``: run as ``python -m benchmarks._cold_worker
BACKEND`` in a fresh interpreter. Nothing is imported before the timed ``import lionagi`` (the
``benchmarks`` package itself imports nothing).

Prints one JSON line: milliseconds of ``import lionagi``, then of ``lionagi.testing``, the first
and the second recorded turn (inside a running event loop, after one scheduler round trip so the
backend itself is loaded), and the modules the first turn imported.
"""

from __future__ import annotations

import time

started = time.perf_counter()
import lionagi  # noqa: E402

imported = time.perf_counter()
from lionagi.testing import FunctionModel  # noqa: E402

testing = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

import anyio  # noqa: E402


def reply(messages: Any, **options: Any) -> str:
    return "ok fine"


async def turns() -> tuple[float, float, list[str]]:
    await anyio.sleep(0)
    branch = lionagi.Branch(system="s", chat_model=FunctionModel(reply))
    before = set(sys.modules)
    a = time.perf_counter()
    await branch.chat_and_record("hi")
    b = time.perf_counter()
    await branch.chat_and_record("hi")
    c = time.perf_counter()
    return b - a, c - b, sorted(set(sys.modules) - before)


first, second, loaded = anyio.run(turns, backend=sys.argv[1])
print(
    json.dumps(
        {
            "import_ms": (imported - started) * 1000,
            "testing_ms": (testing - imported) * 1000,
            "first_turn_ms": first * 1000,
            "second_turn_ms": second * 1000,
            "first_turn_imports": loaded,
        }
    )
)
