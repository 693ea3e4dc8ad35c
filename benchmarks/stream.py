"""Streamed turn: per-delta cost and time to the first delta, through a Branch against
iterating the model's stream directly.

The direct path iterates ``model.stream(history)`` (the same iModel, so the same per-chunk
timeout scope and offline provider). ``Branch.stream`` hands out each text delta as a live event
from inside the turn (driver, one turn step per event: no cancel scope and no task group; the
run body, the event object); ``Branch.run`` hands out whole messages; ``operate_stream`` and
``communicate_stream`` are the live operations' turns (per text delta). All record the reply.
Runs alternate; ratios and
differences are taken pair by pair, all paths measured side by side in one process run.

Time to first delta: from having the prompt to holding its first text delta. For the Branch
that includes building the instruction, waiting for (an idle) Branch, the turn's context,
``RunStart`` and the request; the direct path builds the one message it sends (the same
instruction, ``Instruction(instruction=PROMPT)``: what a caller of ``iModel.stream`` writes)
and starts the model stream. Both send the instruction alone (the Branch has no system
message). It is measured cold (a full garbage collection before each sample, like every other
sample here, after the sample's Branch is built) and warm (the same path ran once just before,
with no collection in between), both sides the same way in the same run. Two other direct paths
run beside it, each with the Branch's figure over it: "instruction built as the Branch builds
it" (the Branch's own unvalidated builder instead of the public constructor: the floor of
building that message), and "history built before the clock", the method of earlier runs (the
direct path's ``[System, Instruction]`` built before its clock starts, while the Branch's
instruction is built after its own starts).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from benchmarks._common import (
    PROMPT,
    SYSTEM,
    Config,
    Unrecorded,
    backends,
    median,
    now,
    settle,
    target,
    us,
)
from benchmarks.turn import observed_branch
from lionagi import Branch, TextDeltaEvent
from lionagi.protocols.messages import Instruction, System, text_instruction
from lionagi.service.types import TextDelta
from lionagi.testing import FunctionModel


def _model(chunks: int) -> FunctionModel:
    pieces = tuple(" tok" for _ in range(chunks))

    def stream(messages: Any, **options: Any) -> tuple[str, ...]:
        return pieces

    model = FunctionModel(lambda messages, **options: "", stream=stream)
    model.provider.calls = Unrecorded()
    return model


def _history() -> list[Any]:
    return [System(content=SYSTEM), Instruction(instruction=PROMPT)]


async def _direct(model: FunctionModel) -> int:
    history = _history()
    start = now()
    count = 0
    async for chunk in model.stream(history):
        count += isinstance(chunk, TextDelta)
    elapsed = now() - start
    assert count > 1
    return elapsed // count


async def _stream(branch: Branch) -> int:
    start = now()
    count = 0
    async with branch.stream(PROMPT) as events:
        async for event in events:
            count += isinstance(event, TextDeltaEvent)
    elapsed = now() - start
    assert count > 1
    return elapsed // count


async def _live(branch: Branch, operation: str) -> int:
    """Per text delta of a live operation: ``operate_stream`` or ``communicate_stream``."""
    events = (
        branch.operate_stream(instruction=PROMPT)
        if operation == "operate_stream"
        else branch.communicate_stream(PROMPT)
    )
    start = now()
    count = 0
    async with events:
        async for event in events:
            count += isinstance(event, TextDeltaEvent)
    elapsed = now() - start
    assert count > 1
    return elapsed // count


async def _run(branch: Branch, chunks: int) -> int:
    start = now()
    async with branch.run(PROMPT) as messages:
        async for _message in messages:
            pass
    return (now() - start) // chunks


def _public_request() -> list[Any]:
    """The direct path's request, as a caller of ``iModel.stream`` writes it."""
    return [Instruction(instruction=PROMPT)]


def _internal_request() -> list[Any]:
    """The same request with the Branch's own unvalidated builder (not public API)."""
    return [text_instruction(PROMPT, None, None, None)]


async def _direct_first(
    model: FunctionModel,
    build: Callable[[], list[Any]] = _public_request,
    prebuilt: list[Any] | None = None,
) -> int:
    """The direct path to its first delta: its request built by ``build`` after the clock
    starts, as the Branch builds its instruction, or ``prebuilt`` before it (the method of
    earlier runs)."""
    start = now()
    chunks = model.stream(build() if prebuilt is None else prebuilt)
    try:
        async for chunk in chunks:
            if isinstance(chunk, TextDelta):
                return now() - start
    finally:
        await chunks.aclose()
    raise AssertionError("no text delta")


@dataclass(slots=True, eq=False)
class _FloorTurn:
    """The state of :func:`_floor_first`'s turn: the model and whether it is running."""

    model: FunctionModel
    busy: bool = False


_floor_turn: ContextVar[_FloorTurn | None] = ContextVar("floor_turn", default=None)


async def _floor_events(
    model: FunctionModel, ask: Instruction
) -> AsyncGenerator[TextDeltaEvent, None]:
    chunks = model.stream([ask])
    try:
        async for chunk in chunks:
            if isinstance(chunk, TextDelta):
                yield TextDeltaEvent(chunk.text)
    finally:
        await chunks.aclose()


async def _floor_first(turn: _FloorTurn) -> int:
    """The floor: a minimal turn written by hand, to its first delta. The instruction built
    as the Branch builds it, a busy flag for the lock, the turn's state in a ContextVar, one
    generator between the model stream and the consumer making the event; no parameters
    checked, no FIFO, no turn id, no history, log, observer or cancellation contract."""
    start = now()
    ask = text_instruction(PROMPT, None, None, None)
    assert not turn.busy
    turn.busy = True
    token = _floor_turn.set(turn)
    try:
        events = _floor_events(turn.model, ask)
        try:
            async for _event in events:
                return now() - start
        finally:
            await events.aclose()
    finally:
        _floor_turn.reset(token)
        turn.busy = False
    raise AssertionError("no text delta")


async def _stream_first(branch: Branch) -> int:
    start = now()
    async with branch.stream(PROMPT) as events:
        async for event in events:
            if isinstance(event, TextDeltaEvent):
                return now() - start
    raise AssertionError("no text delta")


# the other direct paths to the first delta, and the floor (see the module's docstring)
_INTERNAL = "instruction built as the Branch builds it"
_PREBUILT = "history built before the clock"
_FLOOR = "a minimal turn by hand (the floor)"
INTERNAL, INTERNAL_WARM = (f"first delta{kind}, direct, {_INTERNAL}" for kind in ("", " warm"))
PREBUILT, PREBUILT_WARM = (f"first delta{kind}, direct, {_PREBUILT}" for kind in ("", " warm"))
FLOOR, FLOOR_WARM = (f"first delta{kind}, {_FLOOR}" for kind in ("", " warm"))


async def _measure(chunks: int, repeats: int) -> dict[str, list[float]]:
    model = _model(chunks)
    short = _model(8)  # time to first delta: the rest of the reply is not waited for
    counts: dict[str, int] = {}
    times: dict[str, list[float]] = {
        "direct stream": [],
        "Branch.stream": [],
        "Branch.stream + observer": [],
        "Branch.run": [],
        "Branch.operate_stream": [],
        "Branch.communicate_stream": [],
        "first delta, direct": [],
        "first delta, Branch.stream": [],
        INTERNAL: [],
        PREBUILT: [],
        FLOOR: [],
        "first delta warm, direct": [],
        "first delta warm, Branch.stream": [],
        INTERNAL_WARM: [],
        PREBUILT_WARM: [],
        FLOOR_WARM: [],
    }

    def jobs() -> list[tuple[str, Any]]:
        return [
            ("direct stream", lambda: _direct(model)),
            ("Branch.stream", lambda: _stream(Branch(system=SYSTEM, chat_model=model))),
            ("Branch.stream + observer", lambda: _stream(observed_branch(model, counts))),
            ("Branch.run", lambda: _run(Branch(system=SYSTEM, chat_model=model), chunks)),
            (
                "Branch.operate_stream",
                lambda: _live(Branch(system=SYSTEM, chat_model=model), "operate_stream"),
            ),
            (
                "Branch.communicate_stream",
                lambda: _live(Branch(system=SYSTEM, chat_model=model), "communicate_stream"),
            ),
            ("first delta, direct", lambda: _direct_first(short)),
            ("first delta, Branch.stream", lambda: _stream_first(Branch(chat_model=short))),
            (INTERNAL, lambda: _direct_first(short, _internal_request)),
            (PREBUILT, lambda: _direct_first(short, prebuilt=_history())),
            (FLOOR, lambda: _floor_first(_FloorTurn(short))),
        ]

    # the warm first delta: the same path just ran once, and no collection in between
    warm = {
        "first delta warm, direct": lambda: _direct_first(short),
        "first delta warm, Branch.stream": lambda: _stream_first(Branch(chat_model=short)),
        INTERNAL_WARM: lambda: _direct_first(short, _internal_request),
        PREBUILT_WARM: lambda: _direct_first(short, prebuilt=_history()),
        FLOOR_WARM: lambda: _floor_first(_FloorTurn(short)),
    }

    for _ in range(2):  # warm-up
        for _name, job in jobs():
            await job()
    for repeat in range(repeats):
        order = jobs()
        if repeat % 2:
            order.reverse()
        for name, job in order:
            # each side builds what it starts from (its Branch, its coroutine) before the
            # collection
            sample = job()
            settle()
            times[name].append(await sample)
        pairs = list(warm.items())
        if repeat % 2:
            pairs.reverse()
        for name, job in pairs:
            settle()
            await job()  # not measured: it brings this path's code and objects into the caches
            times[name].append(await job())
    return times


PER_DELTA_NOTE = (
    "Every live event is one step of the stream turn (operations/turn.py), which is how a slow "
    "consumer slows the model with nothing buffered. After the first, a step of Branch.stream "
    "opens no task group, no cancel scope and no checkpoint of its own: the waits inside it "
    "register the cancel scopes they already have (the model's per-chunk timeout scope) with "
    "the turn's interrupt, which aclose() from another task cancels. What it adds per delta is "
    "the driver's frame and bookkeeping (the consumer's task, the turn binding), the run body's "
    "generator (a text delta that ends no message passes the segmenter's dispatch by) and the "
    "event object. Both paths pay the model's per-chunk timeout scope and checkpoint; the "
    "request log writes its record once, when the model stream ends. The live operate_stream "
    "and communicate_stream steps open no cancel scope either (their rows: per text delta)."
)
FIRST_NOTE = (
    "The first event of a stream turn pays the turn's start: building the instruction (the "
    "call gives its text alone, so no parameters are bound: every other one is its default), "
    "the FIFO lock, the turn context, the request history, the "
    "request log's record and the segmenter. Like the later ones, its step opens no cancel "
    "scope of its own (RunStart handlers, context providers, limits and retries guard their own "
    "waits); the direct path pays for building its one message (the same instruction, "
    "through the public constructor) and the model stream's own start. Cold: every "
    "sample starts after a full garbage collection (as an idle server's first request; the "
    "Branch and the model are built before it), which "
    "empties CPython's free lists and the CPU caches, so each distinct piece of code the turn's "
    "start runs costs several times its warm price."
)
WARM_NOTE = (
    "The same first delta with warm caches: each side ran the same path once just before, "
    "with no collection in between, so what is left is the work of the turn's start itself."
)


def run(config: Config) -> dict[str, Any]:
    chunks = config.size(1000, 100)
    repeats = config.size(30, 2)
    rows = []
    targets = []
    for backend in backends():
        times = backend.run(_measure, chunks, repeats)
        direct = times["direct stream"]
        first = times["first delta, direct"]
        warm = times["first delta warm, direct"]
        compared = [
            (
                name,
                samples,
                warm
                if name.startswith("first delta warm")
                else first
                if name.startswith("first delta")
                else direct,
            )
            for name, samples in times.items()
        ]
        # the Branch and the floor against the other direct paths: the instruction built the
        # Branch's way, and the earlier method (for comparison with earlier runs)
        measured = {"Branch.stream": "Branch.stream", "the floor": _FLOOR}
        for path, over in (
            ("Branch.stream", _INTERNAL),
            ("the floor", _INTERNAL),
            ("Branch.stream", _PREBUILT),
        ):
            for kind in ("", " warm"):
                compared.append(
                    (
                        f"first delta{kind}, {path}, over the {over}",
                        times[f"first delta{kind}, {measured[path]}"],
                        times[f"first delta{kind}, direct, {over}"],
                    )
                )
        for name, samples, base in compared:
            rows.append(
                {
                    "backend": backend.name,
                    "path": name,
                    "us": us(median(samples)),
                    "overhead_us": us(median([t - d for t, d in zip(samples, base, strict=True)])),
                    "ratio_to_direct": round(
                        median([t / d for t, d in zip(samples, base, strict=True)]), 2
                    ),
                }
            )
        ratio = median([t / d for t, d in zip(times["Branch.stream"], direct, strict=True)])
        first_over = median(
            [t - d for t, d in zip(times["first delta, Branch.stream"], first, strict=True)]
        )
        warm_over = median(
            [t - d for t, d in zip(times["first delta warm, Branch.stream"], warm, strict=True)]
        )
        targets.append(
            target(
                f"per-delta Branch.stream <= 1.3x iModel.stream ({backend.name})",
                round(ratio, 2),
                1.3,
                note=PER_DELTA_NOTE,
            )
        )
        targets.append(
            target(
                f"time to first delta < 50 us over iModel.stream ({backend.name})",
                us(first_over),
                50,
                unit="us",
                note=FIRST_NOTE,
            )
        )
        targets.append(
            target(
                f"time to first delta, warm, < 50 us over iModel.stream ({backend.name})",
                us(warm_over),
                50,
                unit="us",
                note=WARM_NOTE,
            )
        )
    return {
        "title": "Streamed turn",
        "description": (
            f"A streamed turn of {chunks} text chunks, {repeats} runs per path alternating: "
            "median microseconds per text delta (Branch.run: per chunk), the median per-pair "
            "difference to iterating the model's stream directly, and the median per-pair "
            "ratio. 'first delta' rows: microseconds from having the prompt to its first "
            "text delta (an 8-chunk reply), against the direct model stream, which builds "
            "its one message (the instruction) after its clock starts as the Branch does: "
            "cold (a full garbage collection just before, as every other sample) and warm "
            "(the same path ran once just before, with no collection in between). 'instruction "
            "built as the Branch builds it': the direct path with the Branch's own unvalidated "
            "builder instead of the public constructor, and the Branch against it. 'history "
            "built before the clock': the direct path as earlier runs measured it, its "
            "[System, Instruction] built before its clock starts (its overhead: against the "
            "direct path that builds it after), and the Branch against it. 'a minimal turn by "
            "hand (the floor)': the instruction built the Branch's way, a busy flag, the "
            "turn's state in a ContextVar and one generator making the events, with none of "
            "the Branch's contract (no FIFO, turn id, history, log, observer or cancellation "
            "handling); its rows over the direct path that builds the instruction the same way "
            "are the least a turn adds."
        ),
        "columns": ["backend", "path", "us", "overhead_us", "ratio_to_direct"],
        "rows": rows,
        "targets": targets,
    }
