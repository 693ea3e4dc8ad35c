"""What every scenario shares: backends, clocks, the offline model, the floor, the environment."""

from __future__ import annotations

import gc
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio

from lionagi.protocols.messages import AssistantResponse, Instruction, Message, System, Usage
from lionagi.service.types import ModelResponse
from lionagi.testing import FunctionModel

ROOT = Path(__file__).resolve().parent.parent


def portable_path(path: str | os.PathLike[str]) -> str:
    """``path`` as results may record it, without naming this machine's directories.

    Inside the repository it is relative to the repository root; an installed package is
    shown from ``site-packages`` on; anything else keeps its last three parts.
    """
    parts = Path(os.path.abspath(path)).parts
    if "site-packages" in parts:
        return "/".join(parts[parts.index("site-packages") :])
    root = ROOT.parts
    if parts[: len(root)] == root:
        return "/".join(parts[len(root) :]) or "."
    return ".../" + "/".join(parts[-3:])


RESULTS = Path(__file__).resolve().parent / "results"

REPLY = "ok fine"
PROMPT = "hello there"
SYSTEM = "You are a helpful assistant."
INPUT_TOKENS = 9  # what the reply functions report: a constant, so no O(history) work
OUTPUT_TOKENS = 2


@dataclass(frozen=True)
class Backend:
    """An event loop to run a scenario on: anyio backend name plus its options."""

    name: str
    backend: str
    options: dict[str, Any] = field(default_factory=dict)

    def run(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        return anyio.run(fn, *args, backend=self.backend, backend_options=self.options)


def backends() -> list[Backend]:
    """asyncio, asyncio with uvloop (when installed) and trio."""
    found = [Backend("asyncio", "asyncio")]
    try:
        import uvloop  # noqa: F401
    except ImportError:
        pass
    else:
        found.append(Backend("asyncio+uvloop", "asyncio", {"use_uvloop": True}))
    found.append(Backend("trio", "trio"))
    return found


@dataclass(frozen=True)
class Config:
    """How big to make each scenario: ``quick`` shrinks everything to a smoke run."""

    quick: bool
    peer_python: str | None = None

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full


# -- the offline model ----------------------------------------------------------------------
async def reply(messages: Sequence[Message], **options: Any) -> ModelResponse:
    """The zero-latency model function: an async function that answers at once with the same two
    words and reports usage, doing no work that grows with the history.

    Every peer in ``benchmarks.peers`` is given this same call shape (an async reply function
    returning a response that carries usage), so the comparison is of the libraries, not of
    their offline models (word counting, script matching).
    """
    return ModelResponse(
        text=REPLY,
        usage=Usage(input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS),
        model="function",
        provider="function",
        finish_reason="stop",
    )


class Unrecorded(list[Any]):
    """A request log that keeps nothing.

    ``FunctionModel`` records every request in ``calls`` for tests; each request holds its own
    copy of the history, which would make memory grow with the square of a conversation's
    length. The benchmarks measure the library, so they replace that log with this one (on the
    floor and on every measured path alike).
    """

    def append(self, item: Any) -> None:
        pass


def offline_model(**options: Any) -> FunctionModel:
    """A ``FunctionModel`` on :func:`reply` with the default timeout and no request log."""
    model = FunctionModel(reply, **options)
    model.provider.calls = Unrecorded()
    return model


async def floor_turns(model: FunctionModel, turns: int, history: list[Message]) -> None:
    """The library's floor: the model called directly, the two messages built and appended by
    hand. It pays what every call of the library pays (the request object, the model's timeout
    scope, pydantic response, usage and message objects)."""
    for _ in range(turns):
        history.append(Instruction(instruction=PROMPT))
        response = await model.invoke(history)
        history.append(
            AssistantResponse(content=response.text, model=response.model, usage=response.usage)
        )


async def _physical_reply(messages: list[dict[str, str]]) -> dict[str, Any]:
    return {"content": REPLY, "input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS}


async def physical_floor_turns(turns: int, history: list[dict[str, Any]]) -> None:
    """The physical floor: per turn two dicts appended to a list and one await of an async reply
    function. Nothing a library could do costs less; the library's floor is measured against it
    so that floor's own weight is visible."""
    for _ in range(turns):
        history.append({"role": "user", "content": PROMPT})
        answer = await _physical_reply(history)
        history.append({"role": "assistant", **answer})


def new_history() -> list[Message]:
    return [System(content=SYSTEM)]


def new_plain_history() -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}]


# -- clocks and statistics ------------------------------------------------------------------
now = time.perf_counter_ns


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))])


def us(ns: float) -> float:
    return round(ns / 1000.0, 2)


def settle() -> None:
    """Start a measurement from the same place: collect garbage left by the previous one."""
    gc.collect()


def run_python(
    args: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    prefix: Sequence[str] = (),
    cwd: Path = ROOT,
) -> str:
    """Run this interpreter with ``args`` from the repository root (so ``-m benchmarks...`` and
    ``import lionagi`` find this checkout; ``cwd`` names another checkout), under ``prefix`` (a
    tool such as valgrind) if given; the last line it printed, or RuntimeError."""
    done = subprocess.run(
        [*prefix, sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{list(args)} failed: {done.stderr.strip()[-2000:]}")
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else ""


# -- environment ----------------------------------------------------------------------------
def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def environment(module: str, argv: Sequence[str]) -> dict[str, Any]:
    """Machine, Python, package versions and the exact command of this run."""
    import lionagi

    return {
        "command": shlex.join(["python", "-m", module, *argv]),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "usable_cpus": len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else None,
        },
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": portable_path(sys.executable),
        },
        "packages": {
            "lionagi (this repository)": f"{lionagi.__version__} @ {_git_revision() or 'unknown'}",
            **{
                name: _version(name)
                for name in ("anyio", "trio", "uvloop", "pydantic", "pydantic-core", "sniffio")
            },
        },
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def target(
    name: str,
    value: float | None,
    limit: float,
    *,
    unit: str = "x",
    higher_is_better: bool = False,
    note: str = "",
) -> dict[str, Any]:
    """One target verdict: met, or missed by how much (the note says why and what would help)."""
    if value is None or value != value:  # None or NaN: not measured
        return {
            "target": name,
            "value": None,
            "limit": limit,
            "unit": unit,
            "met": None,
            "by": None,
            "note": note,
        }
    met = value >= limit if higher_is_better else value <= limit
    by = None if met else round(limit / value if higher_is_better else value / limit, 3)
    return {
        "target": name,
        "value": round(value, 3),
        "limit": limit,
        "unit": unit,
        "met": met,
        "by": by,
        "note": note,
    }
