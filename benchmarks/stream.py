"""Streamed turn: ``Branch.run`` over a 1,000-chunk reply against iterating the model's stream.

The direct path iterates ``model.stream(history)`` (the same iModel, so the same per-chunk
timeout scope and offline provider). ``run`` adds the turn driver, the segmenter that turns
chunks into messages, recording, and a control check per chunk. Runs alternate; the ratio is
taken pair by pair.
"""

from __future__ import annotations

from typing import Any

from benchmarks._common import (
    PROMPT,
    SYSTEM,
    Config,
    Unrecorded,
    backends,
    median,
    now,
    settle,
    us,
)
from benchmarks.turn import observed_branch
from lionagi import Branch
from lionagi.protocols.messages import Instruction, System
from lionagi.testing import FunctionModel


def _model(chunks: int) -> FunctionModel:
    pieces = tuple(" tok" for _ in range(chunks))

    def stream(messages: Any, **options: Any) -> tuple[str, ...]:
        return pieces

    model = FunctionModel(lambda messages, **options: "", stream=stream)
    model.provider.calls = Unrecorded()
    return model


async def _direct(model: FunctionModel) -> int:
    history = [System(content=SYSTEM), Instruction(instruction=PROMPT)]
    start = now()
    count = 0
    async for _chunk in model.stream(history):
        count += 1
    elapsed = now() - start
    assert count > 1
    return elapsed


async def _run(branch: Branch) -> int:
    start = now()
    async for _message in branch.run(PROMPT):
        pass
    return now() - start


async def _measure(chunks: int, repeats: int) -> dict[str, list[float]]:
    model = _model(chunks)
    counts: dict[str, int] = {}
    times: dict[str, list[float]] = {
        "direct stream": [],
        "Branch.run": [],
        "Branch.run + observer": [],
    }
    for _ in range(2):  # warm-up
        await _direct(model)
        await _run(Branch(system=SYSTEM, chat_model=model))
    for repeat in range(repeats):
        jobs = [
            ("direct stream", lambda: _direct(model)),
            ("Branch.run", lambda: _run(Branch(system=SYSTEM, chat_model=model))),
            ("Branch.run + observer", lambda: _run(observed_branch(model, counts))),
        ]
        if repeat % 2:
            jobs.reverse()
        for name, job in jobs:
            settle()
            times[name].append(await job() / chunks)
    return times


def run(config: Config) -> dict[str, Any]:
    chunks = config.size(1000, 100)
    repeats = config.size(30, 2)
    rows = []
    for backend in backends():
        times = backend.run(_measure, chunks, repeats)
        direct = times["direct stream"]
        for name, samples in times.items():
            rows.append(
                {
                    "backend": backend.name,
                    "path": name,
                    "us_per_chunk": us(median(samples)),
                    "overhead_us_per_chunk": us(
                        median([t - d for t, d in zip(samples, direct, strict=True)])
                    ),
                    "ratio_to_direct": round(
                        median([t / d for t, d in zip(samples, direct, strict=True)]), 2
                    ),
                }
            )
    return {
        "title": "Streamed turn",
        "description": (
            f"One streamed turn of {chunks} text chunks, {repeats} runs per path alternating; "
            "median microseconds per chunk (whole turn / chunks), the median per-pair "
            "difference to iterating the model's stream directly, and the median per-pair "
            "ratio."
        ),
        "columns": ["backend", "path", "us_per_chunk", "overhead_us_per_chunk", "ratio_to_direct"],
        "rows": rows,
        "targets": [],
    }
