"""One cold-start sample for ``benchmarks.cold``: its text is run as ``python -c <this file's
text> BACKEND`` from the root of the checkout to measure (``sys.path[0]`` is then that
directory, so ``import lionagi`` loads that checkout's package). Nothing is imported before the
timed ``import lionagi``.

Prints one JSON line: milliseconds of ``import lionagi``, then of ``from lionagi.testing import
FunctionModel``, then (inside a running event loop, after one scheduler round trip so the
backend itself is loaded) of constructing the first Branch (``lionagi.Branch`` included: a
package that imports its names on first use pays for them here), of the first and the second
recorded turn, and the modules the first turn imported.
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


async def turns() -> tuple[float, float, float, list[str]]:
    await anyio.sleep(0)
    start = time.perf_counter()
    branch = lionagi.Branch(system="s", chat_model=FunctionModel(reply))
    before = set(sys.modules)
    a = time.perf_counter()
    await branch.chat_and_record("hi")
    b = time.perf_counter()
    await branch.chat_and_record("hi")
    c = time.perf_counter()
    return a - start, b - a, c - b, sorted(set(sys.modules) - before)


built, first, second, loaded = anyio.run(turns, backend=sys.argv[1])
print(
    json.dumps(
        {
            "import_ms": (imported - started) * 1000,
            "testing_ms": (testing - imported) * 1000,
            "branch_ms": built * 1000,
            "first_turn_ms": first * 1000,
            "second_turn_ms": second * 1000,
            "first_turn_imports": loaded,
        }
    )
)
