"""Instructions to the first delta and per delta of a streamed turn, under callgrind.

The timed ``stream`` scenario's first-delta and per-delta figures move with the machine's load;
this counts what runs instead, the way :mod:`benchmarks.instructions` does (one worker process
per backend under ``valgrind --tool=callgrind --dump-before=getppid``, ``os.getppid()`` marks
around each measured stretch, ``PYTHONHASHSEED=0``).

- **First delta**: from having the prompt to holding its first text delta, for ``SAMPLES``
  fresh Branches (``branch.stream(PROMPT)``, an 8-chunk reply) against the same model's
  ``iModel.stream([Instruction(instruction=PROMPT)])`` iterated directly: both build the
  instruction inside the stretch (as :mod:`benchmarks.stream` times them). Beside it, the
  direct path with the Branch's own unvalidated instruction builder, and with its history built
  before the stretch (the method of earlier runs). Building the Branch and closing the stream
  afterwards are outside the stretch; a full collection runs before each sample (outside it
  too), so every sample starts from the same heap.
- **Per delta**: the stretch between the ``SKIP``-th delta and the ``SKIP``-th from the end of a
  ``CHUNKS``-chunk reply, over the deltas in it: what one more delta costs once the stream runs,
  for ``Branch.stream``, ``Branch.communicate_stream`` and ``Branch.operate_stream`` against the
  direct model stream.

``python -m benchmarks stream_instructions`` (needs valgrind; not part of the default run), or
``python -m benchmarks.stream_instructions count BACKEND``: one JSON line for one backend (for
comparing builds of the package one after the other, each from an exported copy).
"""

from __future__ import annotations

import gc
import json
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from benchmarks._common import Config
from benchmarks.instructions import WORKER_BACKENDS, _mark, callgrind_totals

SAMPLES = 30  # fresh Branches counted to the first delta
FIRST_CHUNKS = 8  # the reply of a first-delta sample (the rest of it is not waited for)
CHUNKS = 200  # the reply of a per-delta sample
SKIP = 20  # deltas left out at each end of a per-delta sample
STREAMS = 3  # per-delta samples per path

DIRECT_FIRST = "first delta, direct"
INTERNAL_FIRST = "first delta, direct, instruction built as the Branch builds it"
PREBUILT_FIRST = "first delta, direct, history built before the stretch"
STREAM_FIRST = "first delta, Branch.stream"
DIRECT = "per delta, direct"
PER_DELTA = ("Branch.stream", "Branch.communicate_stream", "Branch.operate_stream")


async def _first_delta(
    chunks: AsyncIterator[Any], kind: type, labels: list[str], label: str
) -> None:
    """Iterate ``chunks`` to its first item of ``kind``, mark there, then close it."""
    try:
        async for item in chunks:
            if isinstance(item, kind):
                _mark()
                labels.append(label)
                return
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]  # both kinds of stream have it
    raise AssertionError("no text delta")


async def _window(chunks: AsyncIterator[Any], kind: type, labels: list[str], label: str) -> None:
    """Iterate ``chunks`` to the end, marking after the ``SKIP``-th item of ``kind`` and after
    the ``SKIP``-th from the end."""
    seen = 0
    async for item in chunks:
        if isinstance(item, kind):
            seen += 1
            if seen == SKIP:
                _mark()
                labels.append("setup")
            elif seen == CHUNKS - SKIP:
                _mark()
                labels.append(label)
    assert seen == CHUNKS, seen


async def _worker() -> list[str]:
    """Every stretch, on the backend this runs on; the label of each counter dump, in order."""
    from benchmarks._common import PROMPT
    from benchmarks.stream import _history, _internal_request, _model, _public_request
    from lionagi import Branch, TextDeltaEvent
    from lionagi.service.types import TextDelta

    short, long = _model(FIRST_CHUNKS), _model(CHUNKS)
    labels: list[str] = []

    def live(name: str) -> Callable[[Branch], Any]:
        if name == "Branch.stream":
            return lambda branch: branch.stream(PROMPT)
        if name == "Branch.communicate_stream":
            return lambda branch: branch.communicate_stream(PROMPT)
        return lambda branch: branch.operate_stream(instruction=PROMPT)

    async def direct_first(
        label: str = DIRECT_FIRST,
        build: Callable[[], list[Any]] = _public_request,
        prebuilt: list[Any] | None = None,
    ) -> None:
        """The direct path: its request built by ``build`` inside the stretch, or
        ``prebuilt`` before it (the method of earlier runs)."""
        gc.collect()
        _mark()
        labels.append("setup")
        chunks = short.stream(build() if prebuilt is None else prebuilt)
        await _first_delta(chunks, TextDelta, labels, label)

    def direct_firsts() -> tuple[Callable[[], Awaitable[None]], ...]:
        return (
            direct_first,
            lambda: direct_first(INTERNAL_FIRST, _internal_request),
            lambda: direct_first(PREBUILT_FIRST, prebuilt=_history()),
        )

    async def stream_first() -> None:
        branch = Branch(chat_model=short)
        gc.collect()
        _mark()
        labels.append("setup")
        async with branch.stream(PROMPT) as events:
            await _first_delta(events, TextDeltaEvent, labels, STREAM_FIRST)

    async def direct_window() -> None:
        await _window(long.stream(_history()), TextDelta, labels, DIRECT)

    async def live_window(name: str) -> None:
        async with live(name)(Branch(chat_model=long)) as events:
            await _window(events, TextDeltaEvent, labels, name)

    for _ in range(3):  # warm-up
        for job in (*direct_firsts(), stream_first, direct_window):
            await job()
        for name in PER_DELTA:
            await live_window(name)
    labels[:] = ["setup"] * len(labels)  # the warm-up's stretches are not counted
    for _ in range(SAMPLES):  # alternate, so both sides see the same history of the process
        for direct in direct_firsts():
            await direct()
        await stream_first()
    for _ in range(STREAMS):
        await direct_window()
        for name in PER_DELTA:
            await live_window(name)
    return labels


def count(backend: str, timeout: float = 1800) -> dict[str, float]:
    """Instructions per stretch on ``backend``: first delta per sample (both paths, and the
    difference), per delta for each path (and its ratio to the direct stream)."""
    totals = callgrind_totals(["-m", "benchmarks.stream_instructions", backend], timeout)
    deltas = CHUNKS - 2 * SKIP
    counted = {
        DIRECT_FIRST: totals[DIRECT_FIRST] / SAMPLES,
        INTERNAL_FIRST: totals[INTERNAL_FIRST] / SAMPLES,
        PREBUILT_FIRST: totals[PREBUILT_FIRST] / SAMPLES,
        STREAM_FIRST: totals[STREAM_FIRST] / SAMPLES,
        DIRECT: totals[DIRECT] / (STREAMS * deltas),
    }
    stream = counted[STREAM_FIRST]
    counted["first delta over direct"] = stream - counted[DIRECT_FIRST]
    counted["first delta over direct, instruction built as the Branch builds it"] = (
        stream - counted[INTERNAL_FIRST]
    )
    counted["first delta over direct, history built before the stretch"] = (
        stream - counted[PREBUILT_FIRST]
    )
    for name in PER_DELTA:
        counted[f"per delta, {name}"] = per = totals[name] / (STREAMS * deltas)
        counted[f"per delta, {name} / direct"] = per / counted[DIRECT]
    return counted


def run(config: Config) -> dict[str, Any]:
    title = "Instructions to the first delta and per delta of a streamed turn (callgrind)"
    if shutil.which("valgrind") is None:
        return {
            "title": title,
            "description": "skipped: valgrind is not installed",
            "columns": [],
            "rows": [],
        }
    rows = []
    for backend in WORKER_BACKENDS:
        counted = count(backend)
        for name, value in counted.items():
            is_ratio = name.endswith("/ direct")
            rows.append(
                {
                    "backend": backend,
                    "figure": name,
                    "value": round(value, 3) if is_ratio else round(value),
                    "unit": "x" if is_ratio else "instructions",
                }
            )
    return {
        "title": title,
        "description": (
            f"First delta: from having the prompt to its first text delta, {SAMPLES} fresh "
            f"Branches ({FIRST_CHUNKS}-chunk reply) against iModel.stream iterated directly, "
            "both building the instruction inside the stretch (the direct path also with the "
            "Branch's own builder, and with its history built before the stretch as earlier "
            "runs did), a full collection before each sample. Per delta: the deltas between "
            f"the {SKIP}th and the {SKIP}th from the end of a {CHUNKS}-chunk reply, {STREAMS} "
            "streams per path. One worker process per backend under valgrind --tool=callgrind, "
            "PYTHONHASHSEED=0; deterministic under load, but blind to cache and branch costs."
        ),
        "columns": ["backend", "figure", "value", "unit"],
        "rows": rows,
    }


def main(argv: list[str]) -> int:
    """``python -m benchmarks.stream_instructions BACKEND`` under callgrind (the worker), or
    ``python -m benchmarks.stream_instructions count BACKEND``: one JSON line of the figures
    for that backend."""
    import anyio

    if len(argv) == 2 and argv[0] == "count":
        print(json.dumps({"backend": argv[1], **count(argv[1])}))
        return 0
    if len(argv) != 1:
        print(main.__doc__, file=sys.stderr)
        return 2
    labels = anyio.run(_worker, backend=argv[0])
    print(json.dumps(labels))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
