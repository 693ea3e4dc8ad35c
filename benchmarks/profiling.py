"""Where a recorded turn spends its time: cProfile of sequential ``chat_and_record`` turns.

Reports the functions with the most own time and the share of each area (lionagi modules,
anyio, the event loop, pydantic, the rest). cProfile slows everything and inflates the cost of
many small calls, so read the shares, not the absolute times.
"""

from __future__ import annotations

import cProfile
import pstats
from typing import Any

from benchmarks._common import PROMPT, SYSTEM, Backend, Config, backends, offline_model
from lionagi import Branch

TOP = 15


async def _turns(turns: int) -> None:
    model = offline_model()
    for _ in range(turns // 100 or 1):
        branch = Branch(system=SYSTEM, chat_model=model)
        for _ in range(min(100, turns)):
            await branch.chat_and_record(PROMPT)


def _area(filename: str) -> str:
    path = filename.replace("\\", "/")
    if "/lionagi/" in path:
        return "lionagi/" + path.split("/lionagi/", 1)[1]
    for area in ("anyio", "trio", "pydantic_core", "pydantic", "uvloop", "sniffio", "asyncio"):
        if f"/{area}/" in path:
            return area
    if path.startswith("~") or path == "":
        return "builtins"
    return "other: " + path.rsplit("/", 1)[-1]


def _profile(backend: Backend, turns: int) -> dict[str, Any]:
    backend.run(_turns, 200)  # warm-up
    profiler = cProfile.Profile()
    profiler.enable()
    backend.run(_turns, turns)
    profiler.disable()
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values()) or 1.0
    functions = []
    areas: dict[str, float] = {}
    for (filename, line, name), (_cc, calls, tottime, cumtime, _callers) in raw.items():
        area = _area(filename)
        areas[area] = areas.get(area, 0.0) + tottime
        functions.append((tottime, calls, cumtime, f"{area}:{line}({name})"))
    functions.sort(reverse=True)
    return {
        "turns": turns,
        "top": [
            {
                "function": where,
                "own_share_pct": round(100 * own / total, 1),
                "calls_per_turn": round(calls / turns, 2),
                "cum_share_pct": round(100 * cum / total, 1),
            }
            for own, calls, cum, where in functions[:TOP]
        ],
        "areas": {
            area: round(100 * own / total, 1)
            for area, own in sorted(areas.items(), key=lambda item: -item[1])
            if own / total >= 0.005
        },
    }


def run(config: Config) -> dict[str, Any]:
    turns = config.size(3000, 100)
    rows = []
    details = {}
    for backend in backends():
        if "uvloop" in backend.name:
            continue  # uvloop's loop is C code cProfile cannot see into
        found = _profile(backend, turns)
        details[backend.name] = found
        for entry in found["top"]:
            rows.append({"backend": backend.name, **entry})
    return {
        "title": "Profile of a recorded turn",
        "description": (
            f"cProfile over {turns} chat_and_record turns per backend (fresh Branch every 100 "
            "turns); top functions by own time, as a share of all profiled time."
        ),
        "columns": ["backend", "function", "own_share_pct", "calls_per_turn", "cum_share_pct"],
        "rows": rows,
        "areas": {name: found["areas"] for name, found in details.items()},
        "targets": [],
    }
