"""``python -m benchmarks.reliability [--size full|ci] [--out docs/reliability.md]``.

Runs the reliability harness at full size on asyncio and on trio and writes what it tried and
what held to a markdown report:

- cancellation sweeps of every operation (cancelled at each scheduling point; on trio also
  after each step of the call's task tree), offline and through the HTTP and CLI providers;
- load: concurrent callers on one Branch with random cancellations and controls, many Branches
  at once, and very many sequential turns with their memory traced;
- the fault, bad-input, secrets and sweep suites of ``tests/reliability`` and
  ``tests_trio/test_reliability_trio.py`` (run by pytest, counted per backend).

The scenarios themselves live in ``tests/reliability`` so the CI suites and this run share them.
Exit status 1 when any invariant failed (known, reported bugs are the suites' strict xfails).
"""

from __future__ import annotations

import argparse
import gc
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from xml.etree import ElementTree

import anyio

from tests.reliability.harness import SweepReport, spying_processes, sweep
from tests.reliability.load import (
    LoadReport,
    concurrent_callers,
    many_branches,
    sequential_turns,
)
from tests.reliability.scenarios import (
    SUBJECTS,
    cli_run_subject,
    cli_subject,
    http_run_subject,
    http_subject,
    routing_server,
)

ROOT = Path(__file__).resolve().parent.parent
SUITES = ["tests/reliability", "tests_trio/test_reliability_trio.py"]


@dataclass(frozen=True)
class Size:
    callers: int
    branches: int
    turns: int
    sequential: int
    traced: int  # the last ``traced`` sequential turns run under tracemalloc
    limit: int  # sweep bound, in ticks
    trio_repeats: int  # tries per tick on trio, whose ready-task order varies
    seeds: tuple[int, ...]


SIZES = {
    "full": Size(1000, 10_000, 10, 100_000, 5_000, 400, 5, (1, 2, 3)),
    "ci": Size(300, 200, 10, 2_000, 2_000, 400, 3, (1,)),
}


@dataclass
class BackendRun:
    backend: str
    sweeps: list[tuple[str, SweepReport]] = field(default_factory=list)
    loads: list[LoadReport] = field(default_factory=list)
    leftover_warnings: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0


# -- sweeps and load ------------------------------------------------------------------------------
async def _sweeps(size: Size, run: BackendRun) -> None:
    trio = run.backend == "trio"
    repeats = size.trio_repeats if trio else 1
    for name, make in SUBJECTS.items():
        report = await sweep(name, make, limit=size.limit, repeats=repeats, wire=True)
        run.sweeps.append(("every tick", report))
        if trio:
            report = await sweep(name, make, steps=True, repeats=1, wire=True)
            run.sweeps.append(("every step", report))
    modes = [("sampled ticks", False)] + ([("every step", True)] if trio else [])
    for mode, steps in modes:
        with routing_server() as server:
            for name, factory in (
                ("HTTP chat_and_record", http_subject),
                ("HTTP run (SSE) + tools", http_run_subject),
            ):
                report = await sweep(
                    name,
                    factory(server),
                    geometric=not steps,
                    limit=200_000,
                    repeats=1,
                    steps=steps,
                    wire=True,
                )
                run.sweeps.append((mode, report))
        with spying_processes([]) as processes:
            for name, cli_factory in (
                ("CLI chat_and_record", cli_subject),
                ("CLI run", cli_run_subject),
            ):
                report = await sweep(
                    name,
                    cli_factory(processes),
                    geometric=not steps,
                    limit=500_000,
                    repeats=1,
                    steps=steps,
                    wire=True,
                )
                run.sweeps.append((mode, report))


async def _backend(size: Size, run: BackendRun) -> None:
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await _sweeps(size, run)
        gc.collect()
    for warning in caught:
        text = str(warning.message)
        run.leftover_warnings[text[:160]] += 1
    for seed in size.seeds:
        run.loads.append(await concurrent_callers(size.callers, seed=seed))
    run.loads.append(await many_branches(size.branches, size.turns))
    warmup = size.sequential - size.traced
    run.loads.append(await sequential_turns(size.sequential, warmup=max(warmup, 200)))
    run.seconds = time.perf_counter() - started


# -- the pytest suites ----------------------------------------------------------------------------
class _Collector:
    """Test outcomes per suite file and backend, and the reasons of strict xfails, read from
    pytest's JUnit XML."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self.known: dict[str, set[str]] = {}

    def read(self, xml: Path) -> None:
        for case in ElementTree.parse(xml).iter("testcase"):
            module = case.get("classname", "")
            name = case.get("name", "")
            path = module.replace(".", "/") + ".py"
            if module.startswith("tests_trio"):
                backend = "trio (native)"
            elif "[asyncio" in name:
                backend = "asyncio"
            elif "[trio" in name:
                backend = "trio"
            else:
                backend = "sync"
            skipped = case.find("skipped")
            if case.find("failure") is not None or case.find("error") is not None:
                outcome = "failed"
            elif skipped is not None and skipped.get("type") == "pytest.xfail":
                outcome = "xfailed"
                self.known.setdefault(skipped.get("message", ""), set()).add(path)
            elif skipped is not None:
                outcome = "skipped"
            else:
                outcome = "passed"
            self.counts[(Path(path).name, backend, outcome)] += 1


def _run_suites() -> tuple[_Collector, int]:
    collector = _Collector()
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "suites.xml"
        command = [
            sys.executable,
            "-m",
            "pytest",
            *SUITES,
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={xml}",
        ]
        code = subprocess.run(command, cwd=ROOT, check=False).returncode
        if xml.exists():
            collector.read(xml)
    return collector, code


# -- the report -----------------------------------------------------------------------------------
def _versions() -> str:
    names = ["lionagi", "anyio", "trio", "httpx", "pydantic"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def _sweep_table(run: BackendRun) -> list[str]:
    lines = [
        "| operation | cancelled at | scheduling points | attempts | cancelled before start "
        "| cancelled after start | completed | invariant violations | histories a strict "
        "provider rejects |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, r in run.sweeps:
        lines.append(
            f"| {r.name} | {mode} | {r.points} | {r.attempts} | {r.cancelled_before_start} | "
            f"{r.cancelled_after_start} | {r.completed} | {len(r.violations)} | "
            f"{r.wire_broken} |"
        )
    return lines


def _number(value: float) -> str:
    if float(value).is_integer() or abs(value) >= 10:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def _load_table(run: BackendRun) -> list[str]:
    lines = [
        "| scenario | size | turns started | completed | cancelled | directives accepted "
        "/ issued | seconds | figures | violations |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in run.loads:
        figures = ", ".join(f"{k}: {_number(v)}" for k, v in r.figures.items())
        lines.append(
            f"| {r.name} | {r.size} | {r.turns:,} | {r.completed:,} | {r.cancelled:,} | "
            f"{r.controls_accepted:,} / {r.controlled:,} | {r.seconds:.1f} | {figures} | "
            f"{len(r.violations)} |"
        )
    return lines


def _suite_table(collector: _Collector) -> list[str]:
    suites = sorted({(name, backend) for name, backend, _ in collector.counts})
    lines = [
        "| suite | backend | cases | passed | known bugs (strict xfail) | failed |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, backend in suites:
        counts = {
            o: collector.counts[(name, backend, o)]
            for o in ("passed", "failed", "xfailed", "skipped")
        }
        total = sum(counts.values())
        lines.append(
            f"| {name} | {backend} | {total} | {counts['passed']} | {counts['xfailed']} | "
            f"{counts['failed']} |"
        )
    return lines


def _render(
    command: str, size_name: str, runs: list[BackendRun], collector: _Collector, code: int
) -> str:
    out = [
        "# Reliability",
        "",
        "What the reliability harness tried against lionagi, on asyncio and on trio, and what",
        "held. Produced by:",
        "",
        "```",
        command,
        "```",
        "",
        f"Size `{size_name}`; Python {platform.python_version()} on {platform.system()} "
        f"{platform.machine()}; {_versions()}.",
        "",
        "Every cancellation attempt checks: exactly one terminal signal (`RunFailed` carrying the "
        "cancellation) if the turn started and none otherwise; no active turn context; the turn "
        "lock free with nobody waiting; no task or subprocess left behind; the history a prefix "
        "of what a completed call records, in whole messages; one message signal per recorded "
        "message, before the terminal; then one more turn on the same Branch that must "
        "succeed normally. The scenarios are in `tests/reliability/` (see `harness.py`).",
        "",
    ]
    totals = Counter[str]()
    for run in runs:
        for _, swept in run.sweeps:
            totals["cancellations"] += swept.cancelled_before_start + swept.cancelled_after_start
            totals["attempts"] += swept.attempts
            totals["violations"] += len(swept.violations)
        for load in run.loads:
            totals["cancellations"] += load.cancelled
            totals["violations"] += len(load.violations)
    counted = collector.counts
    faults = sum(v for (n, _, _), v in counted.items() if n == "test_faults.py")
    bad = sum(v for (n, _, _), v in counted.items() if n == "test_bad_input.py")
    out += [
        "## Summary",
        "",
        f"- cancellations tried: {totals['cancellations']:,} "
        f"(in {totals['attempts']:,} sweep attempts plus the load scenarios)",
        f"- fault cases injected: {faults} (test_faults.py, both backends)",
        f"- bad-input cases tried: {bad} (test_bad_input.py, both backends; the corrupted-data "
        "property test runs 300 random corruptions per backend)",
        f"- invariant violations in the sweeps and load: {totals['violations']}",
        f"- suites: pytest exit status {code} "
        f"({'all passed or known bugs' if code == 0 else 'FAILURES'})",
        "",
    ]
    for run in runs:
        out += [
            f"## {run.backend}",
            "",
            f"Sweeps and load took {run.seconds:.0f} s.",
            "",
            "### Cancellation sweeps",
            "",
            *_sweep_table(run),
            "",
            "The last column counts attempts after which the history, rendered into the next "
            "request, holds a tool call without its result; OpenAI and Anthropic reject such a "
            "request (a known bug, see below). It does not fail an attempt.",
            "",
            "### Load",
            "",
            *_load_table(run),
            "",
            'Memory is traced with `tracemalloc`; "beyond the history" is what the traced '
            "turns allocated that is still held after the Branch's history is dropped. On trio "
            "part of it is trio's own bookkeeping: finished cancel scopes stay in its deadline "
            "heap until about a thousand have gathered and it prunes them (bounded, not per "
            "turn).",
            "",
        ]
        problems = [v for _, r in run.sweeps for v in r.violations]
        problems += [f"{r.name}: {v}" for r in run.loads for v in r.violations]
        if problems:
            out += ["### Violations", "", *(f"- {p}" for p in problems[:50]), ""]
        if run.leftover_warnings:
            out += ["### Warnings raised during the sweeps", ""]
            out += [f"- {count} x {text}" for text, count in run.leftover_warnings.items()]
            out.append("")
    out += ["## Suites", "", *_suite_table(collector), ""]
    if collector.known:
        out += [
            "## Known bugs",
            "",
            "Each is a strict xfail in the suites: the test fails today and will flag the fix.",
            "",
        ]
        for reason, paths in sorted(collector.known.items()):
            out.append(f"- {reason} ({', '.join(sorted(paths))})")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args_given = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reliability")
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "reliability.md")
    parser.add_argument("--backends", default="asyncio,trio")
    args = parser.parse_args(args_given)
    size = SIZES[args.size]
    command = shlex.join(["python", "-m", "benchmarks.reliability", *args_given])
    runs = []
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        print(f"{backend}: sweeps and load ({args.size}) ...", file=sys.stderr, flush=True)
        run = BackendRun(backend)
        anyio.run(_backend, size, run, backend=backend)
        runs.append(run)
    print("suites ...", file=sys.stderr, flush=True)
    collector, code = _run_suites()
    failed = code != 0 or any(r.violations for run in runs for _, r in run.sweeps)
    failed = failed or any(run.leftover_warnings for run in runs)
    failed = failed or any(r.violations for run in runs for r in run.loads)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(_render(command, args.size, runs, collector, code))
    print(f"wrote {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
