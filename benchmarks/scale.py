"""Scale-out: many Branches running turns at once in one event loop.

Every Branch gets a task that runs ``TURNS`` recorded turns in a row; all tasks start together
and share one offline model. Timed without tracemalloc; a second pass under tracemalloc gives
the memory per Branch (created, and at the peak of the run) and per recorded turn.
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import anyio

from benchmarks._common import (
    PROMPT,
    SYSTEM,
    Config,
    backends,
    now,
    offline_model,
    settle,
)
from lionagi import Branch

TURNS = 3


async def _run(branches: list[Branch], turns: int) -> None:
    async def talk(branch: Branch) -> None:
        for _ in range(turns):
            await branch.chat_and_record(PROMPT)

    async with anyio.create_task_group() as group:
        for branch in branches:
            group.start_soon(talk, branch)


async def _timed(count: int, turns: int, collect: bool) -> float:
    model = offline_model()
    branches = [Branch(system=SYSTEM, chat_model=model) for _ in range(count)]
    settle()
    if not collect:
        gc.disable()
    try:
        start = now()
        await _run(branches, turns)
        elapsed = now() - start
    finally:
        gc.enable()
    assert all(len(b.msgs) == 1 + 2 * turns for b in branches)
    return count * turns / (elapsed / 1e9)


async def _memory(count: int, turns: int) -> dict[str, float]:
    model = offline_model()
    settle()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        branches = [Branch(system=SYSTEM, chat_model=model) for _ in range(count)]
        created = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        await _run(branches, turns)
        settle()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {
        "bytes_per_branch_created": (created - base) / count,
        "peak_bytes_per_branch": (peak - base) / count,
        "bytes_per_recorded_turn": (after - created) / (count * turns),
    }


def run(config: Config) -> dict[str, Any]:
    count = config.size(10_000, 100)
    traced = config.size(2_000, 50)
    rows = []
    for backend in backends():
        rate = backend.run(_timed, count, TURNS, True)
        rate_no_gc = backend.run(_timed, count, TURNS, False)
        memory = backend.run(_memory, traced, TURNS)
        rows.append(
            {
                "backend": backend.name,
                "branches": count,
                "turns_per_s": round(rate),
                "turns_per_s_gc_off": round(rate_no_gc),
                "KiB_per_branch_created": round(memory["bytes_per_branch_created"] / 1024, 2),
                "peak_KiB_per_branch": round(memory["peak_bytes_per_branch"] / 1024, 2),
                "KiB_per_recorded_turn": round(memory["bytes_per_recorded_turn"] / 1024, 2),
            }
        )
    return {
        "title": "Scale-out",
        "description": (
            f"{count} Branches, each running {TURNS} recorded turns, all concurrently in one "
            "event loop on one shared offline model: turns per second, and the same with the "
            "cyclic garbage collector paused (the difference is the collector walking every "
            f"live object). Memory from a separate run of {traced} Branches under tracemalloc "
            "(per-Branch figures do not depend on the count): per Branch as created, per "
            "Branch at the peak of the run (every turn in flight at once, with its task group, "
            "context and frames), and retained per recorded turn (two messages)."
        ),
        "columns": [
            "backend",
            "branches",
            "turns_per_s",
            "turns_per_s_gc_off",
            "KiB_per_branch_created",
            "peak_KiB_per_branch",
            "KiB_per_recorded_turn",
        ],
        "rows": rows,
        "targets": [],
    }
