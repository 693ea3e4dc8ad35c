"""Peers: the same zero-latency recorded turn through the upstream lionagi release and through
pydantic-ai, alternating with ours in one invocation (asyncio only: pydantic-ai does not run on
trio, and the upstream release is not measured there either).

The upstream release shares this package's import name, so the peers run in their own virtual
environment (``nox -s bench_peers`` builds it) in a worker subprocess
(``benchmarks/_peer_worker.py``), while ours runs in this process. Batches alternate
A B A B ... and every ratio is taken pair by pair.

- upstream lionagi: ``Branch.communicate`` (records both sides) on its scripted offline model,
  whose endpoint call is replaced by an async function answering with constant usage;
- pydantic-ai: ``Agent.run`` on its ``FunctionModel`` with an async function answering with
  constant usage, passing the history back every turn;
- ours: ``Branch.chat_and_record`` on ``FunctionModel`` with an async function answering with
  constant usage, without and with an observer (RunStart, MessageAdded, RunEnd).

Every side shares one model across all its conversations and makes the same model call: an
async function that returns at once, reporting usage. Conversations are one turn long (a new
conversation per request, its creation timed) and 100 turns long.

Run ``python -m benchmarks.peers [--quick] [--peer-python PATH] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import gc
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio

from benchmarks import memory
from benchmarks._common import (
    PROMPT,
    ROOT,
    SYSTEM,
    Config,
    median,
    now,
    offline_model,
    portable_path,
    target,
    us,
)
from benchmarks.long import _ours as _ours_long
from lionagi import Branch, MessageAdded, RunEnd, RunStart, Session

WORKER = Path(__file__).resolve().parent / "_peer_worker.py"
PEERS = ("lionagi (upstream)", "pydantic-ai")
WARM_UP = 20  # untimed turns at the start of every batch, on both sides
LENGTHS = (1, 100)  # turns per conversation
OURS = ("ours", "ours + observer")


def find_peer_python(explicit: str | None) -> tuple[str | None, str]:
    """The interpreter of the peers' environment, and how it was found (or why not)."""
    if explicit is not None:
        if not explicit:
            return None, "disabled"
        if os.sep in explicit:  # a path: the worker runs in a scratch directory, so absolute
            explicit = os.path.abspath(explicit)
        return explicit, "given with --peer-python"
    if importlib.util.find_spec("pydantic_ai") is not None:
        try:
            installed = metadata.version("lionagi")
        except metadata.PackageNotFoundError:
            installed = None
        import lionagi

        if installed and installed != lionagi.__version__:
            return sys.executable, "this interpreter, which has the peers installed"
    found = sorted(glob.glob(str(ROOT / ".nox" / "bench_peers*" / "bin" / "python")))
    if found:
        return found[-1], "the nox bench_peers environment"
    return None, "no peers environment: run `nox -s bench_peers` (or pass --peer-python)"


class Worker:
    """The peers' worker process: one JSON command per line, one JSON answer per line."""

    def __init__(self, python: str, script: Path = WORKER) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="lionagi-peers-")
        self._process = subprocess.Popen(
            [python, "-P", str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self._scratch.name,
        )

    def ask(self, op: str, **arguments: Any) -> dict[str, Any]:
        process = self._process
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
        process.stdin.flush()
        line = process.stdout.readline()
        if not line:
            error = process.stderr.read() if process.stderr else ""
            raise RuntimeError(f"the peers' worker exited: {error.strip()[-2000:]}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the peers' worker failed on {op}: {answer['error']}")
        return answer

    def close(self) -> None:
        try:
            if self._process.poll() is None and self._process.stdin is not None:
                self._process.stdin.close()  # the worker ends at the end of its input
                self._process.wait(timeout=60)
        finally:
            if self._process.poll() is None:
                self._process.kill()
            self._scratch.cleanup()


# -- ours, in this process ---------------------------------------------------------------------
def _observing_session() -> Session:
    session = Session()

    def count(signal: Any, _session: Any) -> None:
        pass

    for kind in (RunStart, MessageAdded, RunEnd):
        session.observe(kind, count)
    return session


async def _our_conversations(model: Any, session: Session | None, turns: int, length: int) -> None:
    for _ in range(max(1, turns // length)):
        if session is None:
            branch = Branch(system=SYSTEM, chat_model=model)
        else:
            branch = session.new_branch(system=SYSTEM, chat_model=model)
        for _ in range(length):
            await branch.chat_and_record(PROMPT)
        if session is not None:
            session.remove_branch(branch)


async def _our_batch(turns: int, length: int, observed: bool) -> int:
    """Nanoseconds for ``turns`` turns in conversations of ``length`` turns, conversations created
    inside the timed span (as on the peers' side); observed: one Session whose observer takes
    RunStart, MessageAdded and RunEnd, each conversation a branch of it, removed at its end."""
    model = offline_model()
    session = _observing_session() if observed else None
    await _our_conversations(model, session, WARM_UP, 1)  # untimed, in this event loop
    start = now()
    await _our_conversations(model, session, turns, length)
    return now() - start


async def _our_memory(count: int) -> dict[str, Any]:
    model = offline_model()
    await memory._conversations(model, 5)
    size, _ = await memory._traced(lambda: memory._conversations(model, count))
    before = len(gc.get_objects())
    kept = await memory._conversations(model, count)
    await anyio.sleep(0)
    gc.collect()
    tracked = len(gc.get_objects()) - before - 1  # less the list holding them
    del kept
    return {"bytes": size / count, "gc_tracked": tracked / count}


def _ours(fn: Any, *args: Any) -> Any:
    return anyio.run(fn, *args, backend="asyncio")


# -- the comparison ------------------------------------------------------------------------------
Pairs = dict[tuple[int, str, str], list[float]]  # (length, peer, ours variant) -> ratios


def compare(config: Config, python: str) -> dict[str, Any]:
    turns = config.size(300, 10)
    repeats = config.size(7, 1)
    long_turns = config.size(1000, 20)
    window = config.size(100, 5)
    count = config.size(1000, 20)
    worker = Worker(python)
    try:
        versions = worker.ask("versions")
        if Path(versions.get("lionagi_path", "")).resolve().is_relative_to(ROOT / "lionagi"):
            raise RuntimeError(
                f"{python} imports this repository's lionagi, not the upstream release; "
                "use the nox bench_peers environment"
            )
        if "lionagi_path" in versions:
            versions["lionagi_path"] = portable_path(versions["lionagi_path"])
        for length in LENGTHS:  # warm-up, every side
            for observed in (False, True):
                _ours(_our_batch, min(turns, 20), min(length, 20), observed)
            for peer in PEERS:
                worker.ask("turns", peer=peer, turns=20, length=min(length, 20), warm_up=0)
        ratios: Pairs = {}
        times: dict[tuple[int, str], list[float]] = {}
        for _ in range(repeats):
            for length in LENGTHS:
                batch = max(1, turns // length) * length  # whole conversations
                for peer in PEERS:  # ours, ours + observer, theirs; then the next peer
                    mine = {
                        name: _ours(_our_batch, batch, length, name == "ours + observer") / batch
                        for name in OURS
                    }
                    answer = worker.ask(
                        "turns", peer=peer, turns=batch, length=length, warm_up=WARM_UP
                    )
                    theirs = answer["ns"] / batch
                    times.setdefault((length, peer), []).append(theirs)
                    for name, ns in mine.items():
                        times.setdefault((length, name), []).append(ns)
                        ratios.setdefault((length, peer, name), []).append(theirs / ns)
        long_ours = _ours(_ours_long, long_turns)
        long_theirs = {p: worker.ask("long", peer=p, turns=long_turns)["times"] for p in PEERS}
        memory_ours = _ours(_our_memory, count)
        memory_theirs = {p: worker.ask("memory", peer=p, count=count) for p in PEERS}
    finally:
        worker.close()
    return _tabulate(
        ratios,
        times,
        long_ours,
        long_theirs,
        memory_ours,
        memory_theirs,
        versions,
        turns=turns,
        repeats=repeats,
        long_turns=long_turns,
        window=window,
        count=count,
    )


SPEED_TARGETS = {
    # (length, peer, ours variant): limit on theirs / ours
    (1, "lionagi (upstream)", "ours"): 25.0,
    (1, "lionagi (upstream)", "ours + observer"): 10.0,
    (1, "pydantic-ai", "ours"): 30.0,
}


def _tabulate(
    ratios: Pairs,
    times: dict[tuple[int, str], list[float]],
    long_ours: list[int],
    long_theirs: dict[str, list[int]],
    memory_ours: dict[str, Any],
    memory_theirs: dict[str, dict[str, Any]],
    versions: dict[str, Any],
    **sizes: int,
) -> dict[str, Any]:
    window = sizes["window"]
    rows = []
    for (length, peer, name), values in ratios.items():
        rows.append(
            {
                "turns_per_conversation": length,
                "peer": peer,
                "ours": name,
                "ours_us_per_turn": us(median(times[(length, name)])),
                "theirs_us_per_turn": us(median(times[(length, peer)])),
                "theirs_over_ours": round(median(values), 1),
                "pair_ratios": ", ".join(f"{r:.1f}" for r in values),
            }
        )
    targets = [
        target(
            f"{peer} / ours ({name}), {length}-turn conversations >= {limit:g}x",
            median(ratios[(length, peer, name)]),
            limit,
            higher_is_better=True,
        )
        for (length, peer, name), limit in SPEED_TARGETS.items()
    ]
    ours_bytes = memory_ours["bytes"]
    pydantic_bytes = memory_theirs["pydantic-ai"]["bytes"]
    targets.append(
        target(
            "memory per one-turn conversation <= pydantic-ai's",
            ours_bytes / pydantic_bytes,
            1.0,
            note=(
                f"Both sides: tracemalloc bytes kept by {sizes['count']:,} one-turn "
                "conversations sharing one model, after one loop iteration and a collection. "
                "Messages and usage are slotted, each message's id kept as the UUID's number "
                "(about 0.17 KiB a message, 72 bytes a usage): our three messages are about 0.58 "
                "KiB. The rest is the Branch's own parts: the logs (the model call's record), the "
                "history's list and its on-added callback (one weak reference), the slotted "
                "Branch with its id (its tool registry is made only when used), and the turn "
                "lock (one small object: its anyio semaphore exists only while a turn waits). "
                "See the memory scenario's breakdown. pydantic-ai keeps its messages in a list "
                "and nothing else per conversation."
            ),
        )
    )
    peer_rows = []
    for peer in PEERS:
        theirs_long = long_theirs[peer]
        freed = memory_theirs[peer]
        peer_rows.append(
            {
                "peer": peer,
                "long_first_us": us(median(theirs_long[:window])),
                "long_last_us": us(median(theirs_long[-window:])),
                "KiB_per_conversation": round(freed["bytes"] / 1024, 2),
                "gc_tracked_per_conversation": round(freed["gc_tracked"], 1),
                "dropped_freed": (
                    "refcount" if freed["by_refcount"] else "gc" if freed["after_gc"] else "NO"
                ),
            }
        )
    peer_rows.append(
        {
            "peer": "ours",
            "long_first_us": us(median(long_ours[:window])),
            "long_last_us": us(median(long_ours[-window:])),
            "KiB_per_conversation": round(ours_bytes / 1024, 2),
            "gc_tracked_per_conversation": round(memory_ours["gc_tracked"], 1),
            "dropped_freed": "see the memory scenario",
        }
    )
    return {
        "title": "Peers",
        "description": (
            f"asyncio. {sizes['repeats']} rounds; in each, for every conversation length and "
            f"peer, {sizes['turns']} turns of ours, ours with an observer, and theirs, back to "
            "back; each ratio is theirs/ours within a round, then the median. Conversations are "
            "created inside the timed span; every side shares one model per process and makes "
            "the same model call (an async function answering at once with constant usage). "
            f"Long: one conversation of {sizes['long_turns']} turns, median of the first and "
            f"last {window}. Memory: {sizes['count']} one-turn conversations kept alive "
            "(tracemalloc, after one event-loop iteration and a collection), sharing one model; "
            "gc_tracked: objects the cyclic collector tracks, per kept conversation."
        ),
        "columns": [
            "turns_per_conversation",
            "peer",
            "ours",
            "ours_us_per_turn",
            "theirs_us_per_turn",
            "theirs_over_ours",
            "pair_ratios",
        ],
        "rows": rows,
        "tables": {
            "Each side alone (long conversation, memory)": {
                "columns": [
                    "peer",
                    "long_first_us",
                    "long_last_us",
                    "KiB_per_conversation",
                    "gc_tracked_per_conversation",
                    "dropped_freed",
                ],
                "rows": peer_rows,
            }
        },
        "peer_versions": versions,
        "targets": targets,
    }


def run(config: Config) -> dict[str, Any]:
    """The peers scenario for ``python -m benchmarks``; skipped, with the reason, when there is
    no peers environment or it cannot be used."""
    python, how = find_peer_python(config.peer_python)
    if python is None:
        return {"title": "Peers", "skipped": how, "rows": [], "columns": [], "targets": []}
    try:
        result = compare(config, python)
    except (OSError, RuntimeError) as exc:
        return {
            "title": "Peers",
            "skipped": f"peers at {python} ({how}) could not run: {exc}",
            "rows": [],
            "columns": [],
            "targets": [],
        }
    result["peer_python"] = f"{portable_path(python)} ({how})"
    return result


def main(argv: list[str] | None = None) -> int:
    from benchmarks._report import run_and_write

    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--peer-python", help="interpreter of the peers' environment")
    parser.add_argument("--out", type=Path, help="results directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    config = Config(quick=args.quick, peer_python=args.peer_python)
    given = sys.argv[1:] if argv is None else argv
    return run_and_write("benchmarks.peers", "peers", given, config, args.out, lambda: run(config))


if __name__ == "__main__":
    raise SystemExit(main())
