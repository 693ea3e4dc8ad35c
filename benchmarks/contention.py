"""Contention: K concurrent callers on one Branch, each asking for one recorded turn.

Turns on a Branch queue in arrival order. Each caller notes when it asks (arrival order and
time) just before calling; the model function notes which caller it is serving and when. From
that: turns per second, the waiting time of each caller (ask -> its model call), and whether
the service order equals the arrival order (FIFO).
"""

from __future__ import annotations

from typing import Any

import anyio

from benchmarks._common import (
    SYSTEM,
    Config,
    Unrecorded,
    backends,
    median,
    now,
    quantile,
    settle,
    us,
)
from lionagi import Branch
from lionagi.testing import FunctionModel

SIZES = (1, 10, 100, 1000)


class _Log:
    def __init__(self) -> None:
        self.arrivals: list[int] = []
        self.asked: dict[int, int] = {}
        self.served: list[tuple[int, int]] = []

    def serve(self, messages: Any, **options: Any) -> str:
        self.served.append((int(messages[-1].instruction.split()[1]), now()))
        return "ok fine"


async def _round(k: int) -> dict[str, Any]:
    log = _Log()
    model = FunctionModel(log.serve)
    model.provider.calls = Unrecorded()
    branch = Branch(system=SYSTEM, chat_model=model)

    async def caller(index: int) -> None:
        log.arrivals.append(index)
        log.asked[index] = now()
        await branch.chat_and_record(f"caller {index}")

    start = now()
    async with anyio.create_task_group() as group:
        for index in range(k):
            group.start_soon(caller, index)
    elapsed = now() - start
    order = [index for index, _ in log.served]
    waits = [at - log.asked[index] for index, at in log.served]
    inversions = sum(1 for a, b in zip(order, log.arrivals, strict=True) if a != b)
    assert len(branch.msgs) == 1 + 2 * k
    return {"elapsed": elapsed, "waits": waits, "fifo": inversions == 0, "out_of_order": inversions}


async def _measure(sizes: tuple[int, ...], turns: int, minimum: int) -> list[dict[str, Any]]:
    await _round(10)  # warm-up
    out = []
    for k in sizes:
        rounds = max(minimum, turns // k)
        rates: list[float] = []
        waits: list[float] = []
        fifo = True
        out_of_order = 0
        settle()
        for _ in range(rounds):
            result = await _round(k)
            rates.append(k / (result["elapsed"] / 1e9))
            waits.extend(result["waits"])
            fifo = fifo and result["fifo"]
            out_of_order += result["out_of_order"]
        out.append(
            {
                "K": k,
                "rounds": rounds,
                "turns_per_s": round(median(rates)),
                "wait_p50_us": us(quantile(waits, 0.5)),
                "wait_p90_us": us(quantile(waits, 0.9)),
                "wait_max_us": us(max(waits)),
                "fifo": fifo,
                "out_of_order": out_of_order,
            }
        )
    return out


def run(config: Config) -> dict[str, Any]:
    turns = config.size(2000, 30)
    rows = []
    all_fifo = True
    for backend in backends():
        for row in backend.run(_measure, SIZES, turns, config.size(3, 1)):
            rows.append({"backend": backend.name, **row})
            all_fifo = all_fifo and row["fifo"]
    return {
        "title": "Contention on one Branch",
        "description": (
            "K callers started together on one Branch, one recorded turn each; rounds repeat "
            f"until about {turns} turns per K (at least {config.size(3, 1)}). Turns per second "
            "is the median over rounds; waits (ask -> model call) are pooled over rounds. "
            "FIFO: every round served callers exactly in arrival order."
        ),
        "columns": [
            "backend",
            "K",
            "rounds",
            "turns_per_s",
            "wait_p50_us",
            "wait_p90_us",
            "wait_max_us",
            "fifo",
            "out_of_order",
        ],
        "rows": rows,
        "targets": [
            {
                "target": "turns on one Branch served in arrival order (FIFO), every K and backend",
                "value": all_fifo,
                "limit": True,
                "unit": "",
                "met": all_fifo,
                "by": None,
                "note": "",
            }
        ],
    }
