"""Flows: per-node overhead of ``Session.flow``, ours against upstream lionagi's.

Two 1,000-node graphs of ``communicate`` nodes on the zero-latency model: *wide* (every node
independent) and *deep* (a chain, each node depending on the previous one), run with
``max_concurrent=5`` (both libraries' default). With a model that costs nothing, a flow's time
per node is its per-node overhead; the part beyond the library's own turn (a new branch and one
``communicate`` without a flow) is reported beside it. Ours and upstream's alternate in one
invocation (upstream in a worker process of the ``bench_peers`` nox environment, asyncio only);
the ratio is taken round by round. Ours also runs on trio, and a 10,000-node flow (wide and
deep) gives its time and its peak traced memory.

Run ``python -m benchmarks.flow [--quick] [--peer-python PATH] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import anyio

from benchmarks._common import (
    PROMPT,
    SYSTEM,
    Config,
    median,
    now,
    offline_model,
    portable_path,
    settle,
    target,
)
from benchmarks.peers import Worker, find_peer_python
from lionagi import Branch, Builder, OperationGraph, Session

WORKER = Path(__file__).resolve().parent / "_flow_peer_worker.py"
SHAPES = ("wide", "deep")
MAX_CONCURRENT = 5


def graph(shape: str, nodes: int) -> OperationGraph:
    builder = Builder()
    previous = None
    for _ in range(nodes):
        depends = [previous] if shape == "deep" and previous is not None else None
        previous = builder.add_operation("communicate", depends_on=depends, instruction=PROMPT)
    return builder.get_graph()


async def _flow_ns(shape: str, nodes: int) -> int:
    built = graph(shape, nodes)
    session = Session(default_branch=Branch(system=SYSTEM, chat_model=offline_model()))
    settle()
    start = now()
    result = await session.flow(built, max_concurrent=MAX_CONCURRENT)
    elapsed = now() - start
    assert len(result["completed_operations"]) == nodes
    return elapsed


async def _floor_ns(nodes: int) -> int:
    """The same turns without a flow: per node a fresh branch with the default's history and
    model (what the flow makes per node) and one ``communicate``."""
    model = offline_model()
    await Branch(system=SYSTEM, chat_model=model).communicate(PROMPT)  # warm-up
    settle()
    start = now()
    for _ in range(nodes):
        await Branch(system=SYSTEM, chat_model=model).communicate(PROMPT)
    return now() - start


def _ours(fn: Any, *args: Any, backend: str = "asyncio") -> Any:
    return anyio.run(fn, *args, backend=backend)


async def _peak(shape: str, nodes: int) -> dict[str, float]:
    built = graph(shape, nodes)
    session = Session(default_branch=Branch(system=SYSTEM, chat_model=offline_model()))
    settle()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = await session.flow(built, max_concurrent=MAX_CONCURRENT)
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result["completed_operations"]) == nodes
    return {"peak_MiB": (peak - before) / 2**20, "retained_MiB": (after - before) / 2**20}


def run(config: Config) -> dict[str, Any]:
    nodes = config.size(1000, 20)
    floor_nodes = config.size(200, 10)
    big = config.size(10_000, 50)
    rounds = config.size(2, 1)
    python, how = find_peer_python(config.peer_python)
    worker = Worker(python, WORKER) if python else None
    rows: list[dict[str, Any]] = []
    targets: list[dict[str, Any]] = []
    versions: dict[str, Any] = {}
    times: dict[tuple[str, str], list[float]] = {}  # (shape, side) -> ns per node
    floors: dict[str, list[float]] = {}
    try:
        if worker is not None:
            versions = worker.ask("versions")
            if "lionagi_path" in versions:
                versions["lionagi_path"] = portable_path(versions["lionagi_path"])
            worker.ask("flow", shape="wide", nodes=10, max_concurrent=MAX_CONCURRENT)
        _ours(_flow_ns, "wide", min(nodes, 20))  # warm-up
        for _ in range(rounds):
            floors.setdefault("ours", []).append(_ours(_floor_ns, floor_nodes) / floor_nodes)
            if worker is not None:
                answer = worker.ask("floor", nodes=floor_nodes)
                floors.setdefault("upstream", []).append(answer["ns"] / floor_nodes)
            for shape in SHAPES:
                times.setdefault((shape, "ours"), []).append(_ours(_flow_ns, shape, nodes) / nodes)
                trio_ns = _ours(_flow_ns, shape, nodes, backend="trio")
                times.setdefault((shape, "ours trio"), []).append(trio_ns / nodes)
                if worker is not None:
                    answer = worker.ask(
                        "flow", shape=shape, nodes=nodes, max_concurrent=MAX_CONCURRENT
                    )
                    times.setdefault((shape, "upstream"), []).append(answer["ns"] / nodes)
    finally:
        if worker is not None:
            worker.close()
    floor_ours = median(floors["ours"])
    floor_theirs = median(floors["upstream"]) if "upstream" in floors else None
    for shape in SHAPES:
        ours = times[(shape, "ours")]
        theirs = times.get((shape, "upstream"), [])
        ratios = [t / o for t, o in zip(theirs, ours, strict=False)]
        ratio = median(ratios) if ratios else None
        rows.append(
            {
                "shape": f"{shape} x{nodes}",
                "ours_us_per_node": _us(median(ours)),
                "ours_beyond_turn_us": _us(median(ours) - floor_ours),
                "ours_trio_us_per_node": _us(median(times[(shape, "ours trio")])),
                "upstream_us_per_node": _us(median(theirs)) if theirs else None,
                "upstream_beyond_turn_us": (
                    _us(median(theirs) - floor_theirs) if theirs and floor_theirs else None
                ),
                "upstream_over_ours": round(ratio, 1) if ratio else None,
                "round_ratios": ", ".join(f"{r:.1f}" for r in ratios),
            }
        )
        targets.append(
            target(
                f"{shape}: upstream time per node / ours >= 10x",
                ratio,
                10.0,
                higher_is_better=True,
                note="" if ratios else f"upstream not measured: {how}",
            )
        )
    scale_rows = []
    for shape in SHAPES:
        elapsed = _ours(_flow_ns, shape, big)
        memory = _ours(_peak, shape, big)
        scale_rows.append(
            {
                "shape": f"{shape} x{big}",
                "seconds": round(elapsed / 1e9, 2),
                "us_per_node": _us(elapsed / big),
                "peak_MiB": round(memory["peak_MiB"], 1),
                "retained_MiB": round(memory["retained_MiB"], 1),
                "KiB_per_node_retained": round(memory["retained_MiB"] * 1024 / big, 2),
            }
        )
    return {
        "title": "Flows",
        "description": (
            f"{nodes}-node graphs of communicate nodes on the zero-latency model, "
            f"max_concurrent={MAX_CONCURRENT} (both libraries' default), {rounds} rounds "
            "alternating ours (asyncio, then trio) and upstream's (asyncio). With a model that "
            "costs nothing, a flow's time per node is its per-node overhead; the ratio is taken "
            "round by round, then the median. 'beyond turn' subtracts each library's own cost "
            f"of the same turn without a flow (a new branch and one communicate, {floor_nodes} "
            "in a row): the part the flow executor adds. 10,000-node flows: time without "
            "tracemalloc, then peak and retained traced memory in a second run (retained: the "
            "session's per-node branches and the result)."
        ),
        "columns": [
            "shape",
            "ours_us_per_node",
            "ours_beyond_turn_us",
            "ours_trio_us_per_node",
            "upstream_us_per_node",
            "upstream_beyond_turn_us",
            "upstream_over_ours",
            "round_ratios",
        ],
        "rows": rows,
        "tables": {
            f"{big:,}-node flows (ours, asyncio)": {
                "columns": [
                    "shape",
                    "seconds",
                    "us_per_node",
                    "peak_MiB",
                    "retained_MiB",
                    "KiB_per_node_retained",
                ],
                "rows": scale_rows,
            }
        },
        "floor_us_per_turn": {
            "ours": _us(floor_ours),
            "upstream": _us(floor_theirs) if floor_theirs else None,
        },
        "peer_versions": versions,
        "peer_python": f"{portable_path(python)} ({how})" if python else None,
        "targets": targets,
    }


def _us(ns: float) -> float:
    return round(ns / 1e3, 1)


def main(argv: list[str] | None = None) -> int:
    from benchmarks._report import run_and_write

    parser = argparse.ArgumentParser(prog="python -m benchmarks.flow", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--peer-python", help="interpreter of the peers' environment")
    parser.add_argument("--out", type=Path, help="results directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    config = Config(quick=args.quick, peer_python=args.peer_python)
    given = sys.argv[1:] if argv is None else argv
    return run_and_write("benchmarks.flow", "flow", given, config, args.out, lambda: run(config))


if __name__ == "__main__":
    raise SystemExit(main())
