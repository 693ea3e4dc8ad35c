"""``python -m benchmarks [scenario ...] [--quick] [--out DIR] [--peer-python PATH]``.

Runs the named scenarios (by default all but the optional ones) on asyncio, asyncio+uvloop and
trio, and writes ``bench.json`` and ``bench.md`` (``bench-<names>`` for a subset, ``-quick`` for
smoke sizes) into ``benchmarks/results/`` or ``--out``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

from benchmarks._common import Config, now
from benchmarks._report import write_results

SCENARIOS = {
    "turn": "turn overhead vs the library model call and the physical floor",
    "backends": "trio against asyncio, side by side in subprocess pairs",
    "stream": "a streamed run of 1,000 chunks vs iterating the model's stream",
    "contention": "K = 1, 10, 100, 1,000 concurrent callers on one Branch",
    "scale": "10,000 Branches running turns at once; memory per Branch and per turn",
    "cancel": "cancelling a turn mid-model-call: time and round trips until free",
    "long": "2,000 recorded turns on one Branch, offline and over HTTP: first 100 vs last 100",
    "cold": "import lionagi and the first turn, each in a fresh process",
    "memory": "retained per 1,000 conversations and per turn; dropped Branch freed",
    "profile": "cProfile of a recorded turn on asyncio and trio",
    "limiter": "retry and rate-limit bookkeeping per invoke that never waits",
    "fairness": "1,000 callers on one rate-limited model: order, windows, waits",
    "batch": "500 conversations through a server failing 15% of requests",
    "peers": "upstream lionagi and pydantic-ai, alternating with ours (needs their env)",
}
# run only when named: slow, and need a tool beside Python
OPTIONAL_SCENARIOS = {
    "instructions": "instructions per turn of the turn variants under valgrind's callgrind",
    "long_instructions": "instructions per turn early and late in a long conversation over HTTP",
    "stream_instructions": "instructions to the first delta and per delta of a streamed turn",
}

MODULES = {"profile": "profiling"}  # a module named profile would shadow the standard one


def main(argv: list[str] | None = None) -> int:
    args_given = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="lionagi benchmarks; results go to benchmarks/results/.",
        epilog="scenarios: "
        + "; ".join(f"{k}: {v}" for k, v in SCENARIOS.items())
        + "; only when named: "
        + "; ".join(f"{k}: {v}" for k, v in OPTIONAL_SCENARIOS.items()),
    )
    parser.add_argument(
        "scenarios", nargs="*", choices=[*SCENARIOS, *OPTIONAL_SCENARIOS, []], metavar="scenario"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--out", type=Path, help="results directory (default benchmarks/results)")
    parser.add_argument(
        "--peer-python",
        help="interpreter of the peers' environment ('' to skip peers); found automatically "
        "when `nox -s bench_peers` has built it",
    )
    args = parser.parse_args(args_given)
    names = args.scenarios or list(SCENARIOS)
    config = Config(quick=args.quick, peer_python=args.peer_python)
    load_start = tuple(round(x, 2) for x in os.getloadavg())
    started = now()
    results = {}
    for name in names:
        what = SCENARIOS.get(name) or OPTIONAL_SCENARIOS[name]
        print(f"{name}: {what} ...", file=sys.stderr, flush=True)
        began = time.perf_counter()
        module = importlib.import_module(f"benchmarks.{MODULES.get(name, name)}")
        results[name] = module.run(config)
        results[name]["seconds"] = round(time.perf_counter() - began, 1)
    stem = None
    if args.scenarios and set(args.scenarios) != set(SCENARIOS):
        stem = "bench-" + "-".join(args.scenarios) + ("-quick" if args.quick else "")
    json_path, md_path = write_results(
        "benchmarks",
        args_given,
        results,
        config,
        args.out,
        now() - started,
        stem=stem,
        load_start=load_start,
    )
    print(f"wrote {json_path} and {md_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
