"""Load scenarios, sized by the caller: the tests run them small, the runner at full size.

- :func:`concurrent_callers`: many callers on ONE Branch, mixed operations, random
  cancellations and loop controls; turns must never overlap, nothing may be lost or duplicated.
- :func:`many_branches`: many Branches, each running several turns, all at once.
- :func:`sequential_turns`: very many turns on one Branch; the memory the turns allocated that
  is still held once the history itself is dropped (traced with ``tracemalloc``) must stay
  within a small bound.

Each returns a :class:`LoadReport` whose ``violations`` list what did not hold.
"""

from __future__ import annotations

import gc
import random
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import anyio
from anyio.lowlevel import checkpoint

from lionagi.protocols.messages import AssistantResponse, Instruction, Message, MessageManager
from lionagi.service.imodel import iModel
from lionagi.session.control import LoopBreak, LoopDirective, StopStream
from lionagi.session.session import Session
from lionagi.session.signal import MessageAdded, Signal
from lionagi.testing import FunctionModel
from tests.helpers import closing
from tests.reliability.harness import EchoProvider, branch_violations
from tests.reliability.scenarios import PERSON_JSON, Person

__all__ = ["LoadReport", "concurrent_callers", "many_branches", "sequential_turns"]

#: memory a turn may leave behind beyond the messages it recorded (bytes, averaged) ...
LEAK_ALLOWANCE = 16
#: ... on top of bounded bookkeeping that is not per turn (trio, for one, prunes stale
#: deadline entries of finished cancel scopes only once about a thousand have gathered)
LEAK_FIXED_ALLOWANCE = 512 * 1024


@dataclass
class LoadReport:
    name: str
    size: str
    turns: int = 0
    completed: int = 0
    cancelled: int = 0
    controlled: int = 0
    controls_accepted: int = 0
    seconds: float = 0.0
    figures: dict[str, float] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)


class _Log:
    """Every signal of a session, as compact tuples (kind, branch id, turn id, message id)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, UUID | None, UUID | None, UUID | None]] = []

    def __call__(self, signal: Signal, session: Any) -> None:
        message = signal.message.id if isinstance(signal, MessageAdded) else None
        self.entries.append(
            (signal.kind, signal.branch_id, getattr(signal, "turn_id", None), message)
        )


def _lifecycle_violations(
    entries: Sequence[tuple[Any, ...]], history: Sequence[Message]
) -> list[str]:
    """Turns of one Branch never overlap: each start is followed by its own terminal before the
    next start, message signals fall inside their turn, and every recorded message has exactly
    one message signal, in history order."""
    found: list[str] = []
    current: UUID | None = None
    turn_ids: set[UUID] = set()
    signalled: list[UUID] = []
    for kind, _, turn_id, message_id in entries:
        if kind == "RunStart":
            if current is not None:
                found.append(f"turn {turn_id} started while {current} was running")
            if turn_id in turn_ids:
                found.append(f"turn id {turn_id} used twice")
            current = turn_id
            turn_ids.add(turn_id)
        elif kind in ("RunEnd", "RunFailed"):
            if turn_id != current:
                found.append(f"terminal of {turn_id} while {current} was running")
            current = None
        elif kind == "MessageAdded":
            if turn_id is not None and turn_id != current:
                found.append(f"message signal of {turn_id} outside its turn")
            signalled.append(message_id)
    if current is not None:
        found.append(f"turn {current} never ended")
    recorded = [m.id for m in history]
    if signalled != recorded:
        found.append(
            f"{len(signalled)} message signals for {len(recorded)} recorded messages "
            "(lost, duplicated or out of order)"
        )
    return found


# -- 1. many callers, one Branch ------------------------------------------------------------------
async def concurrent_callers(n: int, *, seed: int = 0, cancel_rate: float = 0.3) -> LoadReport:
    """``n`` callers at once on one Branch: chat_and_record, communicate, chat and run, a share
    of them cancelled after a random number of ticks, while a controller issues BREAK and
    CANCEL directives to whatever turn is active."""
    rng = random.Random(seed)
    report = LoadReport("concurrent callers on one Branch", f"{n} callers, seed {seed}")
    inside = 0
    overlaps = 0

    async def reply(messages: Sequence[Message], **options: Any) -> str:
        nonlocal inside, overlaps
        inside += 1
        overlaps += inside > 1
        try:
            await checkpoint()
        finally:
            inside -= 1
        if "response_format" in options:
            return PERSON_JSON
        last = messages[-1]
        if isinstance(last, Instruction) and last.instruction in directed:
            # a directive issued inside the turn, before its next control point, is never lost
            report.controlled += 1
            report.controls_accepted += branch.control(directed[last.instruction], reason="load")
        return f"re:{last.instruction}" if isinstance(last, Instruction) else "re:?"

    session = Session()
    log = _Log()
    session.observe(Signal, log)
    branch = session.new_branch(system="load", chat_model=FunctionModel(reply))
    baseline = len(anyio.get_running_tasks())
    operations = rng.choices(
        ["chat_and_record", "communicate", "chat", "run"], weights=[6, 2, 1, 1], k=n
    )
    outcomes: dict[int, str] = {}
    done = anyio.Event()
    # every fifth streamed caller's own turn gets a directive from inside its model call, so the
    # mix has directives that take effect however fast turns run (the controller's may all land
    # after a turn's last control point)
    directed = {
        f"caller-{i}": rng.choice([LoopDirective.BREAK, LoopDirective.CANCEL])
        for i, kind in enumerate(operations)
        if kind == "run" and i % 5 == 0
    }

    async def operation(i: int) -> str:
        text = f"caller-{i}"
        kind = operations[i]
        if kind == "chat_and_record":
            result: Any = await branch.chat_and_record(text)
            expected: Any = f"re:{text}"
        elif kind == "chat":
            result, expected = await branch.chat(text), f"re:{text}"
        elif kind == "communicate":
            result = await branch.communicate(text, response_format=Person)
            expected = Person.model_validate_json(PERSON_JSON)
        else:
            async with closing(branch.run(text)) as stream:
                result = [type(m).__name__ async for m in stream]
            expected = ["Instruction", "AssistantResponse"]
            if result == expected[: len(result)] and len(result) < len(expected):
                return "stop"  # a CANCEL directive ends a stream cleanly, early
        if result != expected:
            report.violations.append(f"caller {i} ({kind}) got {result!r}")
        return "completed"

    async def caller(i: int) -> None:
        scope = anyio.CancelScope()
        ticks = rng.randrange(0, 40) if rng.random() < cancel_rate else None

        async def run() -> None:
            try:
                with scope:
                    outcomes[i] = await operation(i)
                    return
                outcomes[i] = "cancelled"
            except LoopBreak:
                outcomes[i] = "break"
            except StopStream:
                outcomes[i] = "stop"
            except Exception as exc:
                outcomes[i] = "error"
                report.violations.append(f"caller {i} ({operations[i]}) raised {exc!r}")

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            if ticks is not None:
                for _ in range(ticks):
                    await checkpoint()
                scope.cancel()

    async def controller() -> None:
        while not done.is_set():
            for _ in range(rng.randrange(1, 30)):
                await checkpoint()
            directive = rng.choice(
                [LoopDirective.BREAK, LoopDirective.CANCEL, LoopDirective.CONTINUE]
            )
            report.controlled += 1
            report.controls_accepted += branch.control(directive, reason="load")

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        group.start_soon(controller)
        async with anyio.create_task_group() as callers:
            for i in range(n):
                callers.start_soon(caller, i)
        done.set()
    report.seconds = time.perf_counter() - started

    counts = Counter(outcomes.values())
    report.completed = counts["completed"]
    report.cancelled = counts["cancelled"]
    report.figures.update({k: float(v) for k, v in counts.items()})
    report.turns = sum(1 for e in log.entries if e[0] == "RunStart")
    if overlaps:
        report.violations.append(f"{overlaps} model calls overlapped another turn's")
    history = list(branch.msgs)
    report.violations += _lifecycle_violations(log.entries, history[1:])
    report.violations += _history_violations(history, operations, outcomes)
    report.violations += branch_violations(branch)
    if len(anyio.get_running_tasks()) != baseline:
        report.violations.append("tasks left behind")
    if await branch.chat_and_record("after the storm") != "re:after the storm":
        report.violations.append("the Branch did not serve a turn after the load")
    report.violations += branch_violations(branch)
    return report


def _history_violations(
    history: Sequence[Message], operations: Sequence[str], outcomes: dict[int, str]
) -> list[str]:
    """Each caller's instruction at most once; a reply only right after its own instruction;
    completed recording callers have both; chat callers recorded nothing."""
    found: list[str] = []
    position: dict[str, int] = {}
    for index, message in enumerate(history):
        if isinstance(message, Instruction) and message.instruction:
            if message.instruction in position:
                found.append(f"{message.instruction} recorded twice")
            position[message.instruction] = index
        elif isinstance(message, AssistantResponse) and message.content.startswith("re:"):
            owner = message.content[3:]
            if position.get(owner) != index - 1:
                found.append(f"reply to {owner} is not right after its instruction")
    for i, kind in enumerate(operations):
        text = f"caller-{i}"
        if kind == "chat" and text in position:
            found.append(f"chat caller {i} recorded its instruction")
        if kind != "chat" and outcomes.get(i) == "completed" and text not in position:
            found.append(f"completed caller {i} ({kind}) is missing from the history")
    return found


# -- 2. many Branches -----------------------------------------------------------------------------
async def many_branches(branches: int, turns: int) -> LoadReport:
    """``branches`` Branches of one Session, each running ``turns`` turns, all concurrently."""
    report = LoadReport("many Branches at once", f"{branches} branches x {turns} turns")
    session = Session()
    log = _Log()
    session.observe(Signal, log)
    model = iModel(EchoProvider())
    members = [session.new_branch(chat_model=model) for _ in range(branches)]
    baseline = len(anyio.get_running_tasks())

    async def work(branch: Any) -> None:
        for t in range(turns):
            if await branch.chat_and_record(f"t{t}") != "ok":
                report.violations.append(f"branch {branch.id} turn {t} wrong result")

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for branch in members:
            group.start_soon(work, branch)
    report.seconds = time.perf_counter() - started

    by_branch: dict[UUID | None, list[tuple[Any, ...]]] = {}
    for entry in log.entries:
        by_branch.setdefault(entry[1], []).append(entry)
    expected = ["Instruction", "AssistantResponse"] * turns
    for branch in members:
        history = list(branch.msgs)
        if [type(m).__name__ for m in history] != expected:
            report.violations.append(f"branch {branch.id} history is not {turns} whole turns")
        texts = [m.instruction for m in history if isinstance(m, Instruction)]
        if texts != [f"t{t}" for t in range(turns)]:
            report.violations.append(f"branch {branch.id} turns out of order: {texts[:5]}")
        entries = by_branch.get(branch.id, [])
        report.violations += [
            f"branch {branch.id}: {v}" for v in _lifecycle_violations(entries, history)
        ]
        report.violations += branch_violations(branch)
        report.turns += sum(1 for e in entries if e[0] == "RunStart")
        report.completed += sum(1 for e in entries if e[0] == "RunEnd")
    if len(anyio.get_running_tasks()) != baseline:
        report.violations.append("tasks left behind")
    report.figures["turns per second"] = report.turns / report.seconds if report.seconds else 0
    return report


# -- 3. one Branch, very many turns ---------------------------------------------------------------
async def sequential_turns(
    n: int, *, warmup: int = 200, handler: Callable[[Signal, Any], Any] | None = None
) -> LoadReport:
    """``n`` turns one after another on one Branch with an observer. The turns after the first
    ``warmup`` run under ``tracemalloc``: what they allocated and is still held once the history
    is dropped must stay within :data:`LEAK_FIXED_ALLOWANCE` plus :data:`LEAK_ALLOWANCE` bytes
    per turn."""
    measured = n - min(warmup, n)
    report = LoadReport(
        "sequential turns on one Branch", f"{n:,} turns, memory traced over the last {measured:,}"
    )
    started = time.perf_counter()
    session = Session()
    counts: Counter[str] = Counter()
    session.observe(Signal, lambda signal, _: counts.update((signal.kind,)))
    if handler is not None:  # an extra observer, e.g. one that keeps what it sees
        session.observe(Signal, handler)
    branch = session.new_branch(system="s", chat_model=iModel(EchoProvider()))
    for t in range(min(warmup, n)):
        await branch.chat_and_record(f"q{t}")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for t in range(measured):
            await branch.chat_and_record(f"q{warmup + t}")
        report.seconds = time.perf_counter() - started
        recorded = len(branch.msgs)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
        # Drop the history itself; whatever the measured turns allocated that is still alive
        # afterwards is held somewhere else.
        branch._messages = MessageManager()
        branch.logs.clear()  # the branch's logs are kept on purpose too, one record per call
        gc.collect()
        beyond = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    report.turns = counts["RunStart"]
    report.completed = counts["RunEnd"]
    extra = beyond / measured if measured else 0.0
    report.figures.update(
        {
            "history bytes per turn": (grown - beyond) / measured if measured else 0.0,
            "bytes per turn beyond the history": extra,
        }
    )
    if beyond > LEAK_FIXED_ALLOWANCE + LEAK_ALLOWANCE * measured:
        report.violations.append(
            f"{beyond} bytes ({extra:.0f} per turn) held beyond the history after {measured} "
            f"turns (allowance {LEAK_FIXED_ALLOWANCE} + {LEAK_ALLOWANCE} per turn)"
        )
    if recorded != 1 + 2 * n:
        report.violations.append(f"history holds {recorded} messages, expected {1 + 2 * n}")
    if counts["RunStart"] != n or counts["RunEnd"] != n or counts["MessageAdded"] != 2 * n:
        report.violations.append(f"signals {dict(counts)} for {n} turns")
    report.violations += branch_violations(branch)
    return report
