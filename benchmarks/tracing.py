"""Per-turn cost of observability: tracing off, on (no-op API tracer), on (SDK + exporter),
and -- with ``--baseline`` -- tracing off against the code before the instrumentation hooks.

``python -m benchmarks.tracing [--quick] [--baseline SRC] [--out DIR]``
``python -m benchmarks.tracing --instructions [--without-hooks] [--baseline SRC]
[--tree NAME=SRC ...]``
``python -m benchmarks.tracing --write-without-hooks DIR``

``--instructions`` counts machine instructions per turn under ``valgrind --tool=callgrind``
instead of timing: the count does not depend on what else the machine runs, so it compares
trees on a shared, loaded machine. Each variant runs in two fresh interpreters that differ
only in the number of turns; the difference of their totals over the difference of turns is
the per-turn count (start-up and import cancel out).

``--without-hooks`` adds the figure #17 asks for, the cost of tracing off: the same tree
copied with its instrumentation hooks removed (``iModel.invoke``/``send`` call the retry loop
directly, a stream goes straight to ``provider.stream`` and writes no log record, the turn
driver's tracer lines are deleted), counted beside it. A removal that no longer matches the
code stops the run. Beside it goes a second copy without only the tracer's checks (the
Branch's log records of model calls kept, as ``branch.logs`` needs them): the two split the
hooks' cost into the tracer's part and the log record's. ``--write-without-hooks DIR`` only
writes the first copy (to count it with ``benchmarks.instructions``, say).

A count does depend on where the interpreter's objects land in memory: CPython's method
cache is indexed by the address of the attribute name, so a few bytes more in the
environment move the same tree's per-turn count by up to about 1 % (two trees differing only
in code size move the same way). ``--layouts N`` counts every variant under N memory layouts
(the environment padded by 0, 8, 16... bytes; every variant gets the same N) and reports the
median: the same work on every side, with the layout's luck evened out.

Each variant runs ``chat_and_record`` turns in batches (a fresh Branch every 100 turns, so
history length does not matter), alternating with the "off" variant in one process; ratios
are taken pair by pair, then the median. ``--baseline SRC`` points at a checkout of the
package from before the hooks (``git archive <commit> lionagi | tar -x -C SRC``): the "off"
turn is then timed in fresh interpreters alternating between SRC and this tree.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks._common import portable_path

ROOT = Path(__file__).resolve().parent.parent
RESET = 100

# Self-contained: runs against whichever lionagi is first on sys.path (this tree or a
# baseline), so it uses only API that both have.
_CHILD = """
import json, sys, time
import anyio
import lionagi
from lionagi import Branch
from lionagi.service.types import ModelResponse
from lionagi.protocols.messages import Usage
from lionagi.testing import FunctionModel

TURNS, BATCHES = int(sys.argv[1]), int(sys.argv[2])

async def reply(messages, **options):
    return ModelResponse(text="ok", usage=Usage(input_tokens=3, output_tokens=1),
                         model="function", finish_reason="stop")

async def batch():
    model = FunctionModel(reply)
    model.provider.calls = type("Unrecorded", (list,), {"append": lambda self, item: None})()
    started = time.perf_counter_ns()
    for start in range(0, TURNS, 100):
        branch = Branch(system="s", chat_model=model)
        for _ in range(min(100, TURNS - start)):
            await branch.chat_and_record("hello")
    return (time.perf_counter_ns() - started) / TURNS / 1000.0

out = {"lionagi": lionagi.__file__}
for backend in ("asyncio", "trio"):
    anyio.run(batch, backend=backend)  # warm-up
    out[backend] = sorted(anyio.run(batch, backend=backend) for _ in range(BATCHES))[BATCHES // 2]
print(json.dumps(out))
"""


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


# -- in-process variants ----------------------------------------------------------------------
def _in_process(turns: int, batches: int) -> dict[str, Any]:
    import anyio
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from benchmarks._common import offline_model
    from lionagi import Branch, otel

    async def batch() -> float:
        model = offline_model()
        started = time.perf_counter_ns()
        for start in range(0, turns, RESET):
            branch = Branch(system="s", chat_model=model)
            for _ in range(min(RESET, turns - start)):
                await branch.chat_and_record("hello")
        return (time.perf_counter_ns() - started) / turns / 1000.0

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def off() -> None:
        otel.uninstrument()

    def noop() -> None:
        otel.instrument()  # the API's default (no-op) provider: the hooks' own cost

    def sdk() -> None:
        exporter.clear()
        otel.instrument(provider)

    variants = {"on (no-op API tracer)": noop, "on (SDK, in-memory exporter)": sdk}
    results: dict[str, Any] = {}
    for backend in ("asyncio", "trio"):
        rows: dict[str, dict[str, float]] = {}
        off()
        anyio.run(batch, backend=backend)  # warm-up
        for name, setup in variants.items():
            pairs: list[tuple[float, float]] = []
            for _ in range(batches):
                off()
                base = anyio.run(batch, backend=backend)
                setup()
                pairs.append((base, anyio.run(batch, backend=backend)))
            off()
            rows.setdefault("off", {"us_per_turn": _median([p[0] for p in pairs])})
            rows[name] = {
                "us_per_turn": _median([p[1] for p in pairs]),
                "ratio_to_off": _median([b / a for a, b in pairs]),
            }
        results[backend] = rows
    otel.uninstrument()
    provider.shutdown()
    return results


# -- against the code before the hooks -----------------------------------------------------------
def _child(src: Path, turns: int, batches: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(turns), str(batches)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=src,
    )
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def _against_baseline(baseline: Path, turns: int, batches: int, rounds: int) -> dict[str, Any]:
    pairs: dict[str, list[tuple[float, float]]] = {"asyncio": [], "trio": []}
    files: dict[str, str] = {}
    for _ in range(rounds):
        before = _child(baseline, turns, batches)
        now = _child(ROOT, turns, batches)
        files = {"before": before["lionagi"], "now": now["lionagi"]}
        for backend in pairs:
            pairs[backend].append((before[backend], now[backend]))
    return {
        "lionagi files": {k: portable_path(v) for k, v in files.items()},
        **{
            backend: {
                "before_us_per_turn": _median([p[0] for p in values]),
                "off_us_per_turn": _median([p[1] for p in values]),
                "ratio_off_to_before": _median([b / a for a, b in values]),
            }
            for backend, values in pairs.items()
        },
    }


# -- the same tree without the hooks ------------------------------------------------------------
# A stream goes straight to the provider's chunks, with no tracer iterator around them
_STREAM_STRAIGHT = (
    "lionagi/service/imodel.py",
    r"_instrument\.stream\(self, request, (self\.provider\.stream\(request\))\)",
    r"\1",
    1,
)
# What "tracing off" is measured against: this tree with the instrumentation hooks removed, so
# the two differ only in the hooks (and the Branch's log records the model-call hooks write).
# Each removal names the text it replaces; one that does not match exactly as often as expected
# stops the run (the code moved on: update the removal, never count a half-stripped tree).
_WITHOUT_HOOKS: tuple[tuple[str, str, str, int], ...] = (
    # iModel.invoke and iModel.send call the retry loop directly: no tracer, no log record
    (
        "lionagi/service/imodel.py",
        r"await _instrument\.invoke\(self, request, on_retry\)",
        "await self._retried(request, on_retry)",
        2,
    ),
    # a stream goes straight to the provider's chunks and writes no log record
    (
        "lionagi/service/imodel.py",
        r"log = _instrument\.stream_log\(self, request\)",
        "log = None",
        1,
    ),
    _STREAM_STRAIGHT,
    # the turn driver's tracer lines: a step's trace and its end, the turn's trace closed at
    # release, a traced turn kept off the one-frame path (which has no tracer lines)
    (
        "lionagi/operations/turn.py",
        r"\n *traced = None if _instrument\.tracer is None else _instrument\.turn_step\(.*\)",
        "",
        1,
    ),
    (
        "lionagi/operations/turn.py",
        r"\n( *)if traced is not None:.*\n\1    _instrument\.turn_step_done\(.*\)",
        "",
        1,
    ),
    (
        "lionagi/operations/turn.py",
        r"if (options\.get\(\"nests\"\) is False) and _instrument\.tracer is None:.*",
        r"if \1:",
        1,
    ),
    (
        "lionagi/operations/turn.py",
        r"\n( *)if context\.trace is not None:.*\n\1    context\.trace\.close\(\)",
        "",
        1,
    ),
    (
        "lionagi/operations/turn.py",
        r"if context\.nested_tasks or _instrument\.tracer is not None:",
        "if context.nested_tasks:",
        1,
    ),
    (
        "lionagi/operations/turn.py",
        r"\n( *)if _instrument\.tracer is not None:\n\1    return _NOT_STARTED",
        "",
        1,
    ),
)
# what may still name the instrumentation module in a stripped file (the turn binding's
# ContextVar lives there; StreamLog is named in a type alias)
_HOOKS_LEFT = {
    "lionagi/service/imodel.py": {"StreamLog"},
    "lionagi/operations/turn.py": {"active_turn"},
}

# The same tree with only the tracer's checks removed: the Branch's log records of model calls
# stay (``branch.logs`` is a feature of its own), so counted beside the tree without any hook
# it splits the hooks' cost into the tracer's part and the log record's part.
_WITHOUT_TRACER: tuple[tuple[str, str, str, int], ...] = (
    # outside a turn: the retry loop directly
    (
        "lionagi/_instrument.py",
        r"\n( *)if tracer is None:\n\1    (return await model\._retried\(request, on_retry\))"
        r"\n\1return await tracer\.model_call\(.*\)",
        r"\n\1\2",
        1,
    ),
    # in a turn: no tracer branch before the logged call
    (
        "lionagi/_instrument.py",
        r"\n( *)if tracer is not None:\n\1    send = .*\n\1    response = await tracer\..*"
        r"\n\1elif (\(retry := model\.retry\) is None:)",
        r"\n\1if \2",
        1,
    ),
    _STREAM_STRAIGHT,  # a stream goes straight to the provider's chunks (its log record stays)
    *(removal for removal in _WITHOUT_HOOKS if removal[0] == "lionagi/operations/turn.py"),
)
_TRACER_LEFT = {
    "lionagi/_instrument.py": {"tracer.model_call"},  # the traced path of a model call
    "lionagi/service/imodel.py": {"_instrument.stream("},
    "lionagi/operations/turn.py": {"_instrument.tracer", "_instrument.turn_step"},
}


def strip_hooks(src: Path, dest: Path) -> Path:
    """Copy the package ``src/lionagi`` to ``dest/lionagi`` without the instrumentation hooks
    (see ``_WITHOUT_HOOKS``); returns ``dest``. Raises RuntimeError naming the removal that
    did not apply, or a hook left in a stripped file."""
    texts = _removed(src, dest, _WITHOUT_HOOKS)
    for name, text in texts.items():
        left = set(re.findall(r"_instrument\.(\w+)", text)) - _HOOKS_LEFT[name]
        if left:
            raise RuntimeError(f"removing the hooks: {name} still calls _instrument.{left}")
    return _written(dest, texts)


def strip_tracer(src: Path, dest: Path) -> Path:
    """Copy the package ``src/lionagi`` to ``dest/lionagi`` without the tracer's checks but
    with the Branch's log records (see ``_WITHOUT_TRACER``); returns ``dest``."""
    texts = _removed(src, dest, _WITHOUT_TRACER)
    for name, text in texts.items():
        left = {hook for hook in _TRACER_LEFT[name] if hook in text}
        if left:
            raise RuntimeError(f"removing the tracer's checks: {name} still has {left}")
    return _written(dest, texts)


def _removed(
    src: Path, dest: Path, removals: tuple[tuple[str, str, str, int], ...]
) -> dict[str, str]:
    shutil.copytree(src / "lionagi", dest / "lionagi", ignore=shutil.ignore_patterns("__pycache__"))
    texts: dict[str, str] = {}
    for name, pattern, replacement, expected in removals:
        text = texts.get(name)
        if text is None:
            text = (dest / name).read_text()
        text, found = re.subn(pattern, replacement, text)
        if found != expected:
            raise RuntimeError(
                f"removing the hooks: {pattern!r} matched {found} times in {name}, expected "
                f"{expected}; update benchmarks/tracing.py's removals to the code"
            )
        texts[name] = text
    return texts


def _written(dest: Path, texts: dict[str, str]) -> Path:
    for name, text in texts.items():
        compile(text, name, "exec")  # a removal that broke the file fails here, not in a count
        (dest / name).write_text(text)
    return dest


# -- instruction counts (callgrind) ---------------------------------------------------------------
# Runs ``TURNS`` turns after a warm-up, on one backend, with tracing off / no-op / SDK.
_COUNTED = """
import sys
import anyio
from lionagi import Branch
from lionagi.service.types import ModelResponse
from lionagi.protocols.messages import Usage
from lionagi.testing import FunctionModel

TURNS, BACKEND, MODE = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if MODE != "off":
    from lionagi import otel
    provider = None
    if MODE == "sdk":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    otel.instrument(provider)

async def reply(messages, **options):
    return ModelResponse(text="ok", usage=Usage(input_tokens=3, output_tokens=1),
                         model="function", finish_reason="stop")

async def turns(count):
    model = FunctionModel(reply)
    model.provider.calls = type("Unrecorded", (list,), {"append": lambda self, item: None})()
    for start in range(0, count, 100):
        branch = Branch(system="s", chat_model=model)
        for _ in range(min(100, count - start)):
            await branch.chat_and_record("hello")

async def main():
    await turns(200)  # warm-up: caches, first-call paths
    await turns(TURNS)

anyio.run(main, backend=BACKEND)
"""

INSTRUCTION_TURNS = (50, 300)
WITHOUT_HOOKS = "now without the hooks"
WITHOUT_TRACER = "now without the tracer's checks (log records kept)"


def _counted_run(
    src: Path, cache: Path, turns: int, backend: str, mode: str, tool: list[str], layout: int = 0
) -> str:
    """Run the counted program under ``tool`` (a valgrind command line, or nothing) against
    the package tree ``src``; returns its stderr. Bytecode is cached under ``cache`` (this
    machine may set PYTHONDONTWRITEBYTECODE: without a cache every run compiles the package).
    ``layout`` pads the environment by ``8 * layout`` bytes (another memory layout)."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    env["BENCH_LAYOUT_PAD"] = "x" * (8 * layout)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    program = _COUNTED + "\nimport lionagi; print(lionagi.__file__)\n"
    done = subprocess.run(
        [*tool, sys.executable, "-c", program, str(turns), backend, mode],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=src,
    )
    used = Path(done.stdout.strip().splitlines()[-1]).resolve()
    if not used.is_relative_to(src.resolve()):
        raise RuntimeError(f"{src} ran lionagi from {used}")
    return done.stderr


def _per_turn(
    src: Path,
    cache: Path,
    backend: str,
    mode: str,
    window: tuple[int, int] = INSTRUCTION_TURNS,
    layouts: int = 1,
) -> float:
    """Instructions per turn: the median over ``layouts`` memory layouts of the two runs'
    difference (both runs of a pair in the same layout)."""
    _counted_run(src, cache, 1, backend, mode, [])  # compiles and caches the bytecode
    low, high = window
    tool = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    per_layout = []
    for layout in range(layouts):
        counts = []
        for turns in (low, high):
            stderr = _counted_run(src, cache, turns, backend, mode, tool, layout)
            [total] = [line for line in stderr.splitlines() if "Collected :" in line]
            counts.append(int(total.rsplit(":", 1)[1].strip()))
        per_layout.append((counts[1] - counts[0]) / (high - low))
    return _median(per_layout)


def _instruction_counts(
    trees: dict[str, Path],
    window: tuple[int, int] = INSTRUCTION_TURNS,
    workers: int = 2,
    layouts: int = 1,
) -> dict[str, Any]:
    """Instructions per turn of every tree with tracing off, and of this tree traced (the
    ratios are to the first tree)."""
    variants = [(name, src, "off") for name, src in trees.items()]
    variants += [("now, traced (no-op API tracer)", ROOT, "noop")]
    variants += [("now, traced (SDK, in-memory exporter)", ROOT, "sdk")]
    results: dict[str, Any] = {}
    jobs = [(backend, *variant) for backend in ("asyncio", "trio") for variant in variants]
    with tempfile.TemporaryDirectory() as caches:

        def count(job: tuple[str, str, Path, str]) -> float:
            backend, _, src, mode = job
            cache = Path(caches) / str(list(trees.values()).index(src))  # one per tree
            return _per_turn(src, cache, backend, mode, window, layouts)

        with ThreadPoolExecutor(max_workers=workers) as pool:  # each job runs its own processes
            per_job = {
                (job[0], job[1]): n for job, n in zip(jobs, pool.map(count, jobs), strict=True)
            }
    for backend in ("asyncio", "trio"):
        rows = {name: per_job[backend, name] for name, _, _ in variants}
        reference = rows[next(iter(trees))]
        results[backend] = {
            name: {"instructions_per_turn": round(count), "ratio": count / reference}
            for name, count in rows.items()
        }
    return results


def _instructions_markdown(
    results: dict[str, Any],
    command: str,
    window: tuple[int, int] = INSTRUCTION_TURNS,
    layouts: int = 1,
) -> str:
    low, high = window
    median = f" The median over {layouts} memory layouts." if layouts > 1 else ""
    first = next(iter(next(iter(results.values()))))
    lines = [
        "# Tracing overhead in instructions per turn (callgrind)",
        "",
        f"Command: `{command}`",
        "",
        "Machine instructions per `chat_and_record` turn (offline model answering at once, "
        f"fresh Branch every {RESET} turns) under `valgrind --tool=callgrind`: the totals of "
        f"two fresh interpreters running {low} and {high} turns after the same warm-up, "
        f"difference over {high - low}. `PYTHONHASHSEED=0`. The ratio is to the first row "
        f"({first}).{median}",
        "",
        "| backend | tree / variant | instructions per turn | ratio |",
        "|---|---|---|---|",
    ]
    for backend, rows in results.items():
        for name, row in rows.items():
            lines.append(
                f"| {backend} | {name} | {row['instructions_per_turn']:,} | {row['ratio']:.4f} |"
            )
    for stripped, title in (
        (WITHOUT_HOOKS, "Tracing off over the same tree without the hooks (nor log records):"),
        (WITHOUT_TRACER, "Tracing off over the same tree without the tracer's checks:"),
    ):
        if not all(stripped in rows for rows in results.values()):
            continue
        lines += ["", title, ""]
        for backend, rows in results.items():
            bare, off = (rows[name]["instructions_per_turn"] for name in (stripped, "now"))
            lines.append(
                f"- {backend}: {bare:,} -> {off:,} instructions per turn, "
                f"{off - bare:+,} ({(off - bare) / bare:+.2%})"
            )
    return "\n".join(lines) + "\n"


def _markdown(results: dict[str, Any], command: str) -> str:
    lines = [
        "# Tracing overhead",
        "",
        f"Command: `{command}`",
        "",
        "Median microseconds per `chat_and_record` turn (offline model, fresh Branch every "
        f"{RESET} turns); ratios pair by pair from alternating batches in one process.",
        "",
        "| backend | variant | us_per_turn | ratio_to_off |",
        "|---|---|---|---|",
    ]
    for backend, rows in results["in_process"].items():
        for name, row in rows.items():
            ratio = row.get("ratio_to_off")
            shown = "1" if ratio is None else f"{ratio:.3f}"
            lines.append(f"| {backend} | {name} | {row['us_per_turn']:.2f} | {shown} |")
    baseline = results.get("baseline")
    if baseline:
        lines += [
            "",
            "## Tracing off against the code before the hooks",
            "",
            "Fresh interpreters alternating between the two trees; medians over the rounds.",
            "",
            "| backend | before us/turn | off us/turn | off / before |",
            "|---|---|---|---|",
        ]
        for backend in ("asyncio", "trio"):
            row = baseline[backend]
            lines.append(
                f"| {backend} | {row['before_us_per_turn']:.2f} | {row['off_us_per_turn']:.2f} "
                f"| {row['ratio_off_to_before']:.3f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tracing")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--baseline", type=Path, help="package tree from before the hooks")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under callgrind"
    )
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=SRC",
        help="with --instructions: another package tree to count (tracing off)",
    )
    parser.add_argument(
        "--turns",
        default=",".join(map(str, INSTRUCTION_TURNS)),
        metavar="LOW,HIGH",
        help="with --instructions: the two runs' turn counts (a longer window amortizes the "
        "garbage collector's full collections over more turns)",
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="with --instructions: variants counted at once"
    )
    parser.add_argument(
        "--without-hooks",
        action="store_true",
        help="with --instructions: also count this tree with its instrumentation hooks removed "
        "(the cost of tracing off)",
    )
    parser.add_argument(
        "--write-without-hooks",
        type=Path,
        metavar="DIR",
        help="only write this tree without its hooks to DIR/lionagi, and exit",
    )
    parser.add_argument(
        "--layouts",
        type=int,
        default=1,
        help="with --instructions: count each variant under this many memory layouts and "
        "report the median (an odd number; the layout moves a single count by up to ~1 %%)",
    )
    args = parser.parse_args(argv)
    if args.write_without_hooks is not None:
        print(strip_hooks(ROOT, args.write_without_hooks) / "lionagi")
        return 0
    if args.instructions:
        if args.baseline is None and not args.without_hooks:
            parser.error("--instructions needs --baseline or --without-hooks")
        low, _, high = args.turns.partition(",")
        window = (int(low), int(high))
        if args.layouts < 1:
            parser.error("--layouts must be at least 1")
        with tempfile.TemporaryDirectory() as stripped:
            trees = {} if args.baseline is None else {"before the hooks": args.baseline}
            for item in args.tree:
                name, _, src = item.partition("=")
                trees[name] = Path(src)
            if args.without_hooks:
                trees[WITHOUT_HOOKS] = strip_hooks(ROOT, Path(stripped) / "hooks")
                trees[WITHOUT_TRACER] = strip_tracer(ROOT, Path(stripped) / "tracer")
            trees["now"] = ROOT
            counted = _instruction_counts(trees, window, args.workers, args.layouts)
        command = "python -m benchmarks.tracing --instructions"
        if args.without_hooks:
            command += " --without-hooks"
        if args.baseline is not None:
            command += " --baseline <tree before the hooks>"
        fixed = ("before the hooks", WITHOUT_HOOKS, WITHOUT_TRACER, "now")
        named = [name for name in trees if name not in fixed]
        command += "".join(f" --tree '{name}=<tree>'" for name in named)
        if window != INSTRUCTION_TURNS:
            command += f" --turns {low},{high}"
        if args.layouts > 1:
            command += f" --layouts {args.layouts}"
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "tracing-instructions.json").write_text(json.dumps(counted, indent=2) + "\n")
        text = _instructions_markdown(counted, command, window, args.layouts)
        (args.out / "tracing-instructions.md").write_text(text)
        print(text)
        return 0
    turns, batches, rounds = (200, 3, 1) if args.quick else (2000, 9, 5)
    results: dict[str, Any] = {"in_process": _in_process(turns, batches)}
    if args.baseline is not None:
        results["baseline"] = _against_baseline(args.baseline, turns, batches, rounds)
    command = "python -m benchmarks.tracing" + (" --quick" if args.quick else "")
    if args.baseline is not None:
        command += " --baseline <tree of the commit before the hooks>"
    suffix = "-quick" if args.quick else ""
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"tracing{suffix}.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / f"tracing{suffix}.md").write_text(_markdown(results, command))
    print(_markdown(results, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
