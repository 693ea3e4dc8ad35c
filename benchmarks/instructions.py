"""Instructions per turn under callgrind: the turn scenario's variants, counted, not timed.

A shared machine makes every time noisy; the number of instructions a turn executes is not.
Each backend runs in one worker process under ``valgrind --tool=callgrind`` that plays every
variant of :mod:`benchmarks.turn` for the same number of turns (fresh conversations of
``RESET`` turns, after a warm-up). The worker calls ``os.getppid()`` (libc ``getppid``, which
nothing else in the process calls) right before and right after each measured stretch;
``--dump-before=getppid`` makes callgrind write its counters there and start again from zero,
so each stretch gets a file of its own and conversation setup is left out. Instruction counts
leave out what an instruction costs (cache misses, branch mispredictions), so they are a second
figure beside the timed ratios, not a replacement for them.

``python -m benchmarks instructions`` (needs valgrind; skipped without it). Not part of the
default run: two processes under callgrind take minutes.
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

WORKER_BACKENDS = ("asyncio", "trio")


def _mark() -> None:
    os.getppid()  # callgrind dumps its counters before every getppid (--dump-before)


async def _worker(turns: int) -> list[str]:
    """Run every variant; return the label of each counter dump, in order."""
    from benchmarks._common import offline_model
    from benchmarks.turn import RESET, VARIANTS

    model = offline_model()
    counts: dict[str, int] = {}
    labels: list[str] = []
    for name, (setup, run_turns) in VARIANTS.items():
        await run_turns(setup(model, counts), RESET)  # warm-up, not counted
        done = 0
        while done < turns:
            size = min(RESET, turns - done)
            state = setup(model, counts)
            _mark()
            labels.append("setup")
            await run_turns(state, size)
            _mark()
            labels.append(name)
            done += size
    return labels


def _totals(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in callgrind output {path.name}")


def callgrind_totals(worker: list[str], timeout: float) -> dict[str, int]:
    """Run ``python <worker>`` under callgrind and total its instructions per stretch label.

    The worker marks each stretch with :func:`_mark` and prints the labels, in order, as its
    last line (JSON); stretches labelled ``setup`` are left out.
    """
    with tempfile.TemporaryDirectory() as out:
        last_line = run_python(
            worker,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            timeout=timeout,
            prefix=[
                "valgrind",
                "--tool=callgrind",
                "--dump-before=getppid",
                f"--callgrind-out-file={out}/cg.%p",
            ],
        )
        labels = json.loads(last_line)
        dumps = sorted(Path(out).glob("cg.*.*"), key=lambda p: int(p.suffix[1:]))
        # dump k holds what ran between mark k-1 and mark k; the first one is the start-up
        if len(dumps) != len(labels):
            raise RuntimeError(f"{len(dumps)} callgrind dumps for {len(labels)} marks")
        totals: dict[str, int] = {}
        for label, dump in zip(labels, dumps, strict=True):
            if label != "setup":
                totals[label] = totals.get(label, 0) + _totals(dump)
    return totals


def count(backend: str, turns: int, timeout: float = 1800) -> dict[str, float]:
    """Instructions per turn of each variant on ``backend`` (one worker under callgrind)."""
    totals = callgrind_totals(["-m", "benchmarks.instructions", backend, str(turns)], timeout)
    return {name: total / turns for name, total in totals.items()}


def run(config: Config) -> dict[str, Any]:
    from benchmarks.turn import MODEL_CALL

    turns = config.size(300, 20)
    if shutil.which("valgrind") is None:
        return {
            "title": "Instructions per turn (callgrind)",
            "description": "skipped: valgrind is not installed",
            "columns": [],
            "rows": [],
        }
    per_backend = {backend: count(backend, turns) for backend in WORKER_BACKENDS}
    rows = []
    for backend, counted in per_backend.items():
        call = counted[MODEL_CALL]
        for name, instructions in counted.items():
            rows.append(
                {
                    "backend": backend,
                    "variant": name,
                    "instructions_per_turn": round(instructions),
                    "ratio_to_model_call": round(instructions / call, 2),
                    "trio_over_asyncio": round(
                        per_backend["trio"][name] / per_backend["asyncio"][name], 2
                    ),
                }
            )
    return {
        "title": "Instructions per turn (callgrind)",
        "description": (
            f"{turns} turns per variant ({len(WORKER_BACKENDS)} worker processes under "
            "valgrind --tool=callgrind, PYTHONHASHSEED=0), counters dumped around each "
            "measured stretch so conversation setup is excluded; deterministic under load, "
            "but blind to cache and branch costs."
        ),
        "columns": [
            "backend",
            "variant",
            "instructions_per_turn",
            "ratio_to_model_call",
            "trio_over_asyncio",
        ],
        "rows": rows,
    }


def main(argv: list[str]) -> int:
    """``python -m benchmarks.instructions BACKEND TURNS`` under callgrind (the worker), or
    ``python -m benchmarks.instructions count BACKEND TURNS``: one JSON line of instructions
    per turn for each variant (for comparing builds of the package one after the other)."""
    import anyio

    if len(argv) == 3 and argv[0] == "count":
        print(json.dumps({"backend": argv[1], **count(argv[1], int(argv[2]))}))
        return 0
    if len(argv) != 2:
        print(main.__doc__, file=sys.stderr)
        return 2
    labels = anyio.run(_worker, int(argv[1]), backend=argv[0])
    print(json.dumps(labels))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
