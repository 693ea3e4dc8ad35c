"""Cancellation cost: cancel a turn in the middle of its model call; how soon is the Branch free?

The model blocks until cancelled. Once it has been entered, the caller's cancel scope is
cancelled and the measuring task then yields to the scheduler one checkpoint at a time until
the Branch's turn lock is free again: that count is the number of scheduler round trips, and
the time is measured alongside. A second measurement queues another caller behind the
cancelled one and counts the round trips until that caller's model call starts. No sleeps are
on the path.
"""

from __future__ import annotations

from typing import Any

import anyio
from anyio.lowlevel import checkpoint

from benchmarks._common import (
    PROMPT,
    SYSTEM,
    Config,
    Unrecorded,
    backends,
    median,
    now,
    us,
)
from benchmarks.turn import observed_branch
from lionagi import Branch
from lionagi.testing import FunctionModel


class _Gate:
    """A model function that blocks until cancelled, telling the benchmark when it started."""

    def __init__(self) -> None:
        self.entered = anyio.Event()

    async def block(self, messages: Any, **options: Any) -> str:
        self.entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


def _lock_free(branch: Branch) -> bool:
    # Private peek at the turn lock, for measurement only.
    lock = branch._turn_lock
    return not lock.locked() and lock.tasks_waiting == 0


async def _once(branch: Branch, gate: _Gate, queued: bool) -> tuple[int, int]:
    gate.entered = anyio.Event()
    started = anyio.Event()
    scope = anyio.CancelScope()
    fast = FunctionModel(lambda messages, **options: started.set() or "ok fine")
    fast.provider.calls = Unrecorded()

    async def victim() -> None:
        with scope:
            await branch.chat_and_record(PROMPT)

    async def next_caller() -> None:
        await branch.chat_and_record(PROMPT, imodel=fast)

    async with anyio.create_task_group() as group:
        group.start_soon(victim)
        await gate.entered.wait()
        if queued:
            group.start_soon(next_caller)
            while branch._turn_lock.tasks_waiting == 0:
                await checkpoint()
        start = now()
        scope.cancel()
        trips = 0
        while not (started.is_set() if queued else _lock_free(branch)):
            await checkpoint()
            trips += 1
        elapsed = now() - start
    return elapsed, trips


async def _measure(repeats: int) -> dict[str, dict[str, list[int]]]:
    gate = _Gate()
    model = FunctionModel(gate.block)
    model.provider.calls = Unrecorded()
    counts: dict[str, int] = {}
    cases = {
        "to lock free": (lambda: Branch(system=SYSTEM, chat_model=model), False),
        "to lock free, observer": (lambda: observed_branch(model, counts), False),
        "to next caller's model call": (lambda: Branch(system=SYSTEM, chat_model=model), True),
    }
    out: dict[str, dict[str, list[int]]] = {}
    for name, (make, queued) in cases.items():
        branch = make()
        await _once(branch, gate, queued)  # warm-up
        times: list[int] = []
        trips: list[int] = []
        for _ in range(repeats):
            elapsed, count = await _once(branch, gate, queued)
            times.append(elapsed)
            trips.append(count)
        out[name] = {"ns": times, "trips": trips}
    return out


def run(config: Config) -> dict[str, Any]:
    repeats = config.size(300, 5)
    rows = []
    worst = 0
    for backend in backends():
        for name, found in backend.run(_measure, repeats).items():
            if name.startswith("to lock free"):
                worst = max(worst, max(found["trips"]))
            rows.append(
                {
                    "backend": backend.name,
                    "measure": f"cancel -> {name}",
                    "median_us": us(median(found["ns"])),
                    "max_us": us(max(found["ns"])),
                    "median_round_trips": median(found["trips"]),
                    "max_round_trips": max(found["trips"]),
                }
            )
    return {
        "title": "Cancellation cost",
        "description": (
            f"{repeats} cancellations per case of a turn blocked in its model call. Round "
            "trips: checkpoints the measuring task made before the condition held (each lets "
            "every ready task run once)."
        ),
        "columns": [
            "backend",
            "measure",
            "median_us",
            "max_us",
            "median_round_trips",
            "max_round_trips",
        ],
        "rows": rows,
        "targets": [
            {
                "target": "cancel mid-model-call -> lock free within a few scheduler round "
                "trips (max <= 3)",
                "value": worst,
                "limit": 3,
                "unit": "round trips",
                "met": worst <= 3,
                "by": None if worst <= 3 else round(worst / 3, 2),
                "note": (
                    "One round trip for the cancelled task to wake with the cancellation, one "
                    "for the checkpoint anyio makes when the turn's task group exits; trio "
                    "sometimes needs one more for its cancel delivery. No sleeps on the path."
                ),
            }
        ],
    }
