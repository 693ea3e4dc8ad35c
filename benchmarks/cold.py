"""Cold start: ``import lionagi``, the first Branch and the first turn, each in a fresh process.

Every sample is a new interpreter running ``benchmarks/_cold_worker.py``'s text with ``-c`` from
the root of the checkout measured, so nothing else is imported first. It times, with its own
clock, ``import lionagi``, then ``from lionagi.testing import FunctionModel``, then (inside a
running event loop, after one scheduler round trip so the backend itself is loaded) the first
``lionagi.Branch(...)`` and the first and second ``chat_and_record`` turns. Because names may
be imported on first use, no single step is the cold cost: ``import_to_first_turn_ms`` is the
sum of the four steps up to the end of the first turn (the event loop's own start-up, the same
for every checkout, is left out), and it is the figure to compare.

Beside it, in the same alternation, two reference processes: the bare interpreter (``-c
pass``) and one that imports pydantic and defines one model (the least any pydantic-based
library pays).

``python -m benchmarks.cold --base DIR`` also measures the checkout at ``DIR`` (for example a
``git worktree`` of ``main``), alternating the two in every round (which goes first alternates
too), and reports each round's ratio this/base: the before/after of a change in one run.

Bytecode: an installed package runs from compiled ``.pyc`` files. The workers run with a private
``PYTHONPYCACHEPREFIX`` in a temporary directory (warmed by one untimed run) and with
``PYTHONDONTWRITEBYTECODE`` removed, so a machine that disables bytecode caching does not make
every sample compile the package from source. A run compiling from source is reported too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import ROOT, Config, median, run_python, target
from benchmarks._report import run_and_write

PYDANTIC_FLOOR = (
    "import time; t = time.perf_counter(); import pydantic\n"
    "class M(pydantic.BaseModel):\n    x: int\n"
    "print((time.perf_counter() - t) * 1000)"
)
WORKER = (Path(__file__).resolve().parent / "_cold_worker.py").read_text(encoding="utf-8")
STEPS = ("import_ms", "testing_ms", "branch_ms", "first_turn_ms")
COLUMNS = [
    "tree",
    "bytecode",
    "backend",
    "import_lionagi_ms",
    "then_testing_ms",
    "then_branch_ms",
    "first_turn_ms",
    "import_to_first_turn_ms",
    "second_turn_ms",
    "import_pydantic_one_model_ms",
    "bare_interpreter_process_ms",
    "first_turn_imports",
]


def _env(cache: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="lionagi-nopyc-")  # stays empty
    else:
        env["PYTHONPYCACHEPREFIX"] = cache
    return env


def _sample(tree: Path, backend: str, env: dict[str, str]) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(
        run_python(["-c", WORKER, backend], env=env, timeout=120, cwd=tree)
    )
    answer["total_ms"] = sum(answer[step] for step in STEPS)
    return answer


def _commit(tree: Path) -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True
    )
    return done.stdout.strip() or "(not a git checkout)"


def _process_ms(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    run_python(args, env=env, timeout=120)
    return (time.perf_counter() - start) * 1000


def _row(tree: str, label: str, backend: str, got: dict[str, list[float]], imports: str) -> Any:
    m = {k: median(v) for k, v in got.items()}
    return m, {
        "tree": tree,
        "bytecode": label,
        "backend": backend,
        "import_lionagi_ms": round(m["import_ms"], 1),
        "then_testing_ms": round(m["testing_ms"], 1),
        "then_branch_ms": round(m["branch_ms"], 2),
        "first_turn_ms": round(m["first_turn_ms"], 2),
        "import_to_first_turn_ms": round(m["total_ms"], 1),
        "second_turn_ms": round(m["second_turn_ms"], 3),
        "import_pydantic_one_model_ms": round(m["pydantic_one_model_ms"], 1),
        "bare_interpreter_process_ms": round(m["process_pass_ms"], 1),
        "first_turn_imports": imports or "none",
    }


def run(config: Config, base: Path | None = None) -> dict[str, Any]:
    samples = config.size(15, 1)
    trees = [("this", ROOT)] + ([] if base is None else [("base", base)])
    rows = []
    measured: dict[str, dict[str, float]] = {}
    ratios: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="lionagi-pyc-") as cache:
        env = _env(cache)
        for _, tree in trees:  # warm the bytecode cache, untimed
            for backend in ("asyncio", "trio"):
                _sample(tree, backend, env)
        run_python(["-c", PYDANTIC_FLOOR], env=env)
        variants = [("bytecode cached", env)] + ([] if config.quick else [("from source", None)])
        for label, environment in variants:
            run_env = env if environment is not None else _env(None)
            count = samples if environment is not None else max(2, samples // 5)
            for backend in ("asyncio", "trio"):
                got: dict[str, dict[str, list[float]]] = {name: {} for name, _ in trees}
                imports: dict[str, str] = {}
                pair = ratios.setdefault(f"{label}, {backend}", {"total_ms": [], "import_ms": []})
                for round_ in range(count):  # trees alternate which goes first
                    order = trees if round_ % 2 == 0 else trees[::-1]
                    answers = {}
                    for name, tree in order:
                        answer = answers[name] = _sample(tree, backend, run_env)
                        for key in (*STEPS, "second_turn_ms", "total_ms"):
                            got[name].setdefault(key, []).append(answer[key])
                        imports[name] = ", ".join(answer["first_turn_imports"])
                    if base is not None:
                        for key in pair:
                            pair[key].append(answers["this"][key] / answers["base"][key])
                    passed = _process_ms(["-c", "pass"], run_env)
                    floor = float(run_python(["-c", PYDANTIC_FLOOR], env=run_env))
                    for name, _ in trees:
                        got[name].setdefault("process_pass_ms", []).append(passed)
                        got[name].setdefault("pydantic_one_model_ms", []).append(floor)
                for name, _ in trees:
                    medians, row = _row(name, label, backend, got[name], imports[name])
                    measured[f"{name}, {label}, {backend}"] = medians
                    rows.append(row)
    cached = measured["this, bytecode cached, asyncio"]
    result: dict[str, Any] = {
        "title": "Cold start",
        "description": (
            f"{samples} fresh processes per backend and checkout with bytecode cached (fewer "
            "compiling from source), each timing its own `import lionagi`, then "
            "`lionagi.testing`, then the first Branch, then the first and second recorded turn "
            "inside a running loop; `import_to_first_turn_ms` is the sum of the steps up to the "
            "end of the first turn. Alternating with a bare interpreter process (whole process, "
            "wall) and one importing pydantic and defining one model (its own clock). Medians."
            + ("" if base is None else f" Base: the checkout at commit {_commit(base)}.")
        ),
        "columns": COLUMNS,
        "rows": rows,
        "targets": [
            target(
                "`import lionagi` (bytecode cached, asyncio) <= 120 ms",
                cached["import_ms"],
                120.0,
                unit="ms",
                note=(
                    "Names are imported on first use, so compare `import_to_first_turn_ms` "
                    "too; the pydantic-with-one-model column is the part no pydantic-based "
                    "library avoids."
                ),
            ),
            target(
                "first turn (bytecode cached, asyncio) <= 3 ms",
                cached["first_turn_ms"],
                3.0,
                unit="ms",
            ),
        ],
    }
    if base is not None:
        result["tables"] = {
            "this / base, median of the ratios within each round": {
                "columns": ["run", "import_to_first_turn", "import_lionagi"],
                "rows": [
                    {
                        "run": key,
                        "import_to_first_turn": round(median(pair["total_ms"]), 3),
                        "import_lionagi": round(median(pair["import_ms"]), 3),
                    }
                    for key, pair in ratios.items()
                ],
            }
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cold", description=__doc__)
    parser.add_argument("--base", type=Path, help="another checkout to alternate with this one")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--out", type=Path, help="results directory (default benchmarks/results)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    config = Config(quick=args.quick)
    base = None if args.base is None else args.base.resolve()
    given = sys.argv[1:] if argv is None else argv
    # the base checkout's directory is this machine's; the description names its commit
    recorded = ["BASE" if base is not None and Path(a).resolve() == base else a for a in given]
    return run_and_write(
        "benchmarks.cold", "cold", recorded, config, args.out, lambda: run(config, base)
    )


if __name__ == "__main__":
    raise SystemExit(main())
