"""Conversation store throughput: appends per second to one SQLite file.

``python -m benchmarks.store [--quick] [--out DIR]``

Three shapes, each on asyncio and trio, each on a fresh file in a temporary folder:

- sequential: one task appending messages one after another (latency of one durable append:
  a worker-thread hop, a transaction and its fsync);
- concurrent: 50 branches, all appends started at once through one store;
- two stores: the same, split over two stores (two connections: SQLite serializes writers).

Every append is its own transaction in WAL mode with ``synchronous=FULL``, so the figures
are bound by the disk's fsync rate, not by lionagi.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from uuid import uuid4

ROOT = Path(__file__).resolve().parent.parent


async def _sequential(path: Path, count: int) -> float:
    from lionagi.protocols.messages import Instruction
    from lionagi.store import ConversationStore

    branch_id = uuid4()
    messages = [Instruction(instruction=f"message {i}") for i in range(count)]
    async with ConversationStore(path) as store:
        started = time.perf_counter()
        for message in messages:
            await store.append(branch_id, message)
        return count / (time.perf_counter() - started)


async def _concurrent(path: Path, count: int, stores: int) -> float:
    import anyio

    from lionagi.protocols.messages import Instruction
    from lionagi.store import ConversationStore

    branch_ids = [uuid4() for _ in range(50)]
    opened = [ConversationStore(path) for _ in range(stores)]
    messages = [Instruction(instruction=f"message {i}") for i in range(count)]
    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for index, message in enumerate(messages):
            group.start_soon(opened[index % stores].append, branch_ids[index % 50], message)
    rate = count / (time.perf_counter() - started)
    for store in opened:
        await store.aclose()
    return rate


def main(argv: list[str] | None = None) -> int:
    import anyio

    parser = argparse.ArgumentParser(prog="python -m benchmarks.store")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    count = 100 if args.quick else 1000
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for backend in ("asyncio", "trio"):
            row: dict[str, float] = {}
            for name, run in (
                ("sequential", lambda p: _sequential(p, count)),
                ("concurrent, 50 branches", lambda p: _concurrent(p, count, 1)),
                ("concurrent, 50 branches, 2 stores", lambda p: _concurrent(p, count, 2)),
            ):
                path = Path(folder) / f"{backend}-{len(row)}.db"
                row[name] = anyio.run(run, path, backend=backend)
            results[backend] = row
    lines = [
        "# Conversation store throughput",
        "",
        f"Command: `python -m benchmarks.store{' --quick' if args.quick else ''}`",
        "",
        f"{count:,} appends per shape; each append is one transaction (WAL, synchronous=FULL) "
        "in a worker thread.",
        "",
        "| backend | shape | appends/s |",
        "|---|---|---|",
    ]
    for backend, row in results.items():
        lines += [f"| {backend} | {name} | {rate:,.0f} |" for name, rate in row.items()]
    text = "\n".join(lines) + "\n"
    suffix = "-quick" if args.quick else ""
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"store{suffix}.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / f"store{suffix}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
