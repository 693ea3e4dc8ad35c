"""Long conversations: one Branch, thousands of sequential recorded turns.

Every turn is timed on its own. The median of the first 100 turns is compared with the median
of the last 100: a driver that re-renders or re-counts the whole history on every turn shows a
ratio that grows with the length. The floor (the model called directly on a growing list) runs
the same way for comparison.
"""

from __future__ import annotations

from typing import Any

from benchmarks._common import (
    PROMPT,
    SYSTEM,
    Config,
    backends,
    floor_turns,
    median,
    new_history,
    now,
    offline_model,
    settle,
    target,
    us,
)
from lionagi import Branch

WINDOW = 100


async def _ours(turns: int) -> list[int]:
    branch = Branch(system=SYSTEM, chat_model=offline_model())
    times = []
    for _ in range(turns):
        start = now()
        await branch.chat_and_record(PROMPT)
        times.append(now() - start)
    assert len(branch.msgs) == 1 + 2 * turns
    return times


async def _floor(turns: int) -> list[int]:
    model = offline_model()
    history = new_history()
    times = []
    for _ in range(turns):
        start = now()
        await floor_turns(model, 1, history)
        times.append(now() - start)
    return times


async def _measure(turns: int, repeats: int, window: int) -> dict[str, list[tuple[float, float]]]:
    await _ours(window)  # warm-up
    out: dict[str, list[tuple[float, float]]] = {"chat_and_record": [], "floor": []}
    for _ in range(repeats):
        for name, job in (("chat_and_record", _ours), ("floor", _floor)):
            settle()
            times = await job(turns)
            out[name].append((median(times[:window]), median(times[-window:])))
    return out


def run(config: Config) -> dict[str, Any]:
    turns = config.size(2000, 60)
    window = config.size(WINDOW, 10)
    repeats = config.size(3, 1)
    rows = []
    targets = []
    for backend in backends():
        measured = backend.run(_measure, turns, repeats, window)
        for name, pairs in measured.items():
            first = median([a for a, _ in pairs])
            last = median([b for _, b in pairs])
            ratio = median([b / a for a, b in pairs])
            rows.append(
                {
                    "backend": backend.name,
                    "path": name,
                    "turns": turns,
                    f"us_turns_1_{window}": us(first),
                    f"us_turns_{turns - window + 1}_{turns}": us(last),
                    "last_over_first": round(ratio, 2),
                }
            )
            if name == "chat_and_record":
                targets.append(
                    target(
                        f"turns {turns - window + 1}-{turns} <= 2x turns 1-{window} "
                        f"({backend.name})",
                        ratio,
                        2.0,
                        note=(
                            "What still grows with the history is C-level copying: the request's "
                            "snapshot of the history and the offline model's prefix check for "
                            "its word count (about 15-25 us at 4,000 messages)."
                        ),
                    )
                )
    return {
        "title": "Long conversation",
        "description": (
            f"One Branch, {turns} sequential recorded turns ({2 * turns + 1} messages at the "
            f"end), every turn timed; median of the first {window} against the last {window}, "
            f"median over {repeats} conversations. The floor appends to a plain list and calls "
            "the model on it."
        ),
        "columns": [
            "backend",
            "path",
            "turns",
            f"us_turns_1_{window}",
            f"us_turns_{turns - window + 1}_{turns}",
            "last_over_first",
        ],
        "rows": rows,
        "targets": targets,
    }
