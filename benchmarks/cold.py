"""Cold start: ``import lionagi`` and the first turn, each in a fresh process.

Every sample is a new interpreter (``python -m benchmarks._cold_worker BACKEND``; the
``benchmarks`` package imports nothing) that times, with its own clock, ``import lionagi``, then
``from lionagi.testing import FunctionModel``, then (inside a running event loop, after one
scheduler round trip so the backend itself is loaded) the first ``chat_and_record`` turn and the
second one. Beside it, in the same alternation, two
reference processes: the bare interpreter (``-c pass``) and one that imports pydantic and
defines one model (the least any pydantic-based library pays).

Bytecode: an installed package runs from compiled ``.pyc`` files. The workers run with a private
``PYTHONPYCACHEPREFIX`` in a temporary directory (warmed by one untimed run) and with
``PYTHONDONTWRITEBYTECODE`` removed, so a machine that disables bytecode caching does not make
every sample compile the package from source. A run compiling from source is reported too.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

from benchmarks._common import Config, median, run_python, target

PYDANTIC_FLOOR = (
    "import time; t = time.perf_counter(); import pydantic\n"
    "class M(pydantic.BaseModel):\n    x: int\n"
    "print((time.perf_counter() - t) * 1000)"
)


def _env(cache: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="lionagi-nopyc-")  # stays empty
    else:
        env["PYTHONPYCACHEPREFIX"] = cache
    return env


def _spawn(args: list[str], env: dict[str, str]) -> str:
    return run_python(args, env=env, timeout=120)


def _process_ms(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    _spawn(args, env)
    return (time.perf_counter() - start) * 1000


def run(config: Config) -> dict[str, Any]:
    samples = config.size(15, 1)
    worker = ["-m", "benchmarks._cold_worker"]  # from ROOT: this checkout's lionagi
    rows = []
    measured: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="lionagi-pyc-") as cache:
        env = _env(cache)
        for backend in ("asyncio", "trio"):  # warm the bytecode cache, untimed
            _spawn([*worker, backend], env)
        _spawn(["-c", PYDANTIC_FLOOR], env)
        variants = [("bytecode cached", env)] + ([] if config.quick else [("from source", None)])
        for label, environment in variants:
            run_env = env if environment is not None else _env(None)
            count = samples if environment is not None else max(2, samples // 5)
            for backend in ("asyncio", "trio"):
                got: dict[str, list[float]] = {}
                for _ in range(count):  # ours, the two references, ours, ...
                    answer = json.loads(_spawn([*worker, backend], run_env))
                    for key in ("import_ms", "testing_ms", "first_turn_ms", "second_turn_ms"):
                        got.setdefault(key, []).append(answer[key])
                    got.setdefault("process_pass_ms", []).append(
                        _process_ms(["-c", "pass"], run_env)
                    )
                    got.setdefault("pydantic_one_model_ms", []).append(
                        float(_spawn(["-c", PYDANTIC_FLOOR], run_env))
                    )
                medians = {k: median(v) for k, v in got.items()}
                measured[f"{label}, {backend}"] = medians
                rows.append(
                    {
                        "bytecode": label,
                        "backend": backend,
                        "import_lionagi_ms": round(medians["import_ms"], 1),
                        "then_testing_ms": round(medians["testing_ms"], 1),
                        "first_turn_ms": round(medians["first_turn_ms"], 2),
                        "second_turn_ms": round(medians["second_turn_ms"], 3),
                        "import_pydantic_one_model_ms": round(medians["pydantic_one_model_ms"], 1),
                        "bare_interpreter_process_ms": round(medians["process_pass_ms"], 1),
                        "first_turn_imports": ", ".join(answer["first_turn_imports"]) or "none",
                    }
                )
    cached = measured["bytecode cached, asyncio"]
    return {
        "title": "Cold start",
        "description": (
            f"{samples} fresh processes per backend with bytecode cached (fewer compiling from "
            "source), each timing its own `import lionagi`, then `lionagi.testing`, then the "
            "first and second recorded turn inside a running loop; alternating with a bare "
            "interpreter process (whole process, wall) and one importing pydantic and defining "
            "one model (its own clock). Medians."
        ),
        "columns": [
            "bytecode",
            "backend",
            "import_lionagi_ms",
            "then_testing_ms",
            "first_turn_ms",
            "second_turn_ms",
            "import_pydantic_one_model_ms",
            "bare_interpreter_process_ms",
            "first_turn_imports",
        ],
        "rows": rows,
        "targets": [
            target(
                "`import lionagi` (bytecode cached, asyncio) <= 120 ms",
                cached["import_ms"],
                120.0,
                unit="ms",
                note=(
                    "Most of it is pydantic's own import and building the schemas of the "
                    "message, signal, tool and service models at import time; compare the "
                    "pydantic-with-one-model column for the part no pydantic-based library avoids."
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
