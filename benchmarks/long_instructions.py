"""Instructions per turn of the long conversation through the OpenAI provider, under callgrind.

The timed ``long`` scenario compares the first 100 turns of a 2,000-turn conversation with the
last 100 on the wall clock and in client CPU time; both move with the machine's load. This
counts what the client executes instead: one conversation per backend through the real
OpenAI-compatible provider against the loopback server (``benchmarks/_loopback_server.py``,
not under callgrind), with callgrind's counters dumped around two windows of the same
conversation -- early turns and the last turns before 2,000 -- the same way
:mod:`benchmarks.instructions` does (``os.getppid()`` marks, ``--dump-before=getppid``).

Instructions count neither kernel time (sending the body over the socket) nor cache misses,
so they show what the library's own code does per byte of history, not what a turn costs.

``python -m benchmarks long_instructions`` (needs valgrind; not part of the default run).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._common import Config, run_python
from benchmarks.instructions import WORKER_BACKENDS, _mark, _totals

WINDOW = 30


async def _worker(turns: int, window: int) -> None:
    from benchmarks._common import PROMPT, SYSTEM
    from benchmarks.long import _http_model, _Server
    from lionagi import Branch

    with _Server() as port:
        model = _http_model(port)
        branch = Branch(system=SYSTEM, chat_model=model)
        for done in range(turns):
            if done in (5, turns - window):
                _mark()
            await branch.chat_and_record(PROMPT)
            if done in (5 + window - 1, turns - 1):
                _mark()
        await model.aclose()


def count(backend: str, turns: int, window: int) -> tuple[float, float]:
    """Instructions per turn in the early window and in the last one."""
    with tempfile.TemporaryDirectory() as out:
        run_python(
            ["-m", "benchmarks.long_instructions", backend, str(turns), str(window)],
            env={**os.environ, "PYTHONHASHSEED": "0"},
            timeout=3600,
            prefix=[
                "valgrind",
                "--tool=callgrind",
                "--dump-before=getppid",
                f"--callgrind-out-file={out}/cg.%p",
            ],
        )
        dumps = sorted(Path(out).glob("cg.*.*"), key=lambda p: int(p.suffix[1:]))
        if len(dumps) != 4:
            raise RuntimeError(f"{len(dumps)} callgrind dumps for 4 marks")
        # dump k holds what ran up to mark k: 2 is the early window, 4 the last one
        return _totals(dumps[1]) / window, _totals(dumps[3]) / window


def run(config: Config) -> dict[str, Any]:
    turns = config.size(2000, 80)
    window = config.size(WINDOW, 10)
    title = "Long conversation through the OpenAI provider, instructions per turn (callgrind)"
    if shutil.which("valgrind") is None:
        return {"title": title, "description": "skipped: valgrind is not installed"}
    rows = []
    for backend in WORKER_BACKENDS:
        early, late = count(backend, turns, window)
        rows.append(
            {
                "backend": backend,
                "turns": turns,
                f"instructions_turns_6_{5 + window}": round(early),
                f"instructions_turns_{turns - window + 1}_{turns}": round(late),
                "growth_per_turn": round(late - early),
                "last_over_first": round(late / early, 3),
            }
        )
    return {
        "title": title,
        "description": (
            f"One {turns}-turn conversation per backend through the OpenAI provider against "
            "the loopback server (another process, not counted); callgrind counters of the "
            f"client dumped around turns 6-{5 + window} and the last {window} turns "
            "(PYTHONHASHSEED=0). Instructions leave out kernel time and cache misses: they "
            "are what the library's own code does more per turn as the history grows."
        ),
        "columns": list(rows[0]),
        "rows": rows,
    }


def main(argv: list[str]) -> int:
    """``python -m benchmarks.long_instructions BACKEND TURNS WINDOW``: the worker, run under
    callgrind by :func:`count`."""
    import anyio

    if len(argv) != 3:
        print(main.__doc__, file=sys.stderr)
        return 2
    anyio.run(_worker, int(argv[1]), int(argv[2]), backend=argv[0])
    print(json.dumps("done"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
