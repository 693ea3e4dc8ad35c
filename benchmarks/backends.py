"""trio against asyncio, side by side: the same turns in subprocess pairs, backends alternating.

Dividing medians taken minutes apart on a shared machine measures the machine as much as the
backends. Here every pair is two fresh worker processes started one right after the other, one
per backend (which one goes first alternates between pairs), each running the same batches of
the ``turn`` scenario's variants; the ratio trio/asyncio is taken within each pair, then the
median over pairs.

A worker is ``python -m benchmarks.backends --worker BACKEND TURNS BATCHES``; it prints one JSON
line: nanoseconds per turn of each variant, the median of its batches.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio

from benchmarks._common import Config, median, run_python, target, us
from benchmarks.turn import MODEL_CALL, VARIANTS, _batch

MEASURED = (MODEL_CALL, "chat_and_record", "chat_and_record + observer")
PAIR = ("asyncio", "trio")


async def _worker(turns: int, batches: int) -> dict[str, float]:
    from benchmarks._common import offline_model, settle

    model = offline_model()
    counts: dict[str, int] = {}
    for name in MEASURED:  # warm-up
        await _batch(VARIANTS[name], model, min(turns, 100), counts)
    times: dict[str, list[float]] = {name: [] for name in MEASURED}
    for repeat in range(batches):
        order = MEASURED[repeat % len(MEASURED) :] + MEASURED[: repeat % len(MEASURED)]
        for name in order:
            settle()
            times[name].append(await _batch(VARIANTS[name], model, turns, counts) / turns)
    return {name: median(samples) for name, samples in times.items()}


def _spawn(backend: str, turns: int, batches: int) -> dict[str, float]:
    command = ["-m", "benchmarks.backends", "--worker", backend, str(turns), str(batches)]
    answer: dict[str, float] = json.loads(run_python(command))
    return answer


def run(config: Config) -> dict[str, Any]:
    pairs = config.size(16, 2)  # pair ratios spread 0.6-2.3: 8 pairs left the median unsettled
    turns = config.size(1000, 20)
    batches = config.size(3, 1)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in PAIR}
    for index in range(pairs):
        order = PAIR if index % 2 == 0 else PAIR[::-1]
        for backend in order:
            samples[backend].append(_spawn(backend, turns, batches))
    rows = []
    ratios: dict[str, float] = {}
    for name in MEASURED:
        per_pair = [
            t[name] / a[name] for a, t in zip(samples["asyncio"], samples["trio"], strict=True)
        ]
        ratios[name] = median(per_pair)
        rows.append(
            {
                "variant": name,
                "asyncio_us": us(median([a[name] for a in samples["asyncio"]])),
                "trio_us": us(median([t[name] for t in samples["trio"]])),
                "trio_over_asyncio": round(ratios[name], 3),
                "pair_ratios": ", ".join(f"{r:.2f}" for r in per_pair),
            }
        )
    return {
        "title": "trio against asyncio",
        "description": (
            f"{pairs} pairs of worker processes, one per backend, started back to back (the "
            f"first of a pair alternates); each worker runs {batches} batches of {turns} turns "
            "of each variant (as in `turn`) and reports the median per turn; the ratio is taken "
            "within each pair, then the median over pairs."
        ),
        "columns": ["variant", "asyncio_us", "trio_us", "trio_over_asyncio", "pair_ratios"],
        "rows": rows,
        "targets": [
            target(
                "recorded turn: trio / asyncio, side by side",
                ratios["chat_and_record"],
                1.15,
                note=(
                    "what is left is mostly the event loop's own work per model call (trio's "
                    "scheduler and checkpoints cost more than asyncio's): the library model "
                    "call alone is about 1.13x by instruction count, the turn's own work about "
                    "the same on both (see `instructions`)."
                ),
            )
        ],
    }


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "--worker":
        backend, turns, batches = argv[1], int(argv[2]), int(argv[3])
        result = anyio.run(_worker, turns, batches, backend=backend)
        print(json.dumps(result))
        return 0
    print("usage: python -m benchmarks.backends --worker BACKEND TURNS BATCHES", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
