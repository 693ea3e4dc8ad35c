"""The reliability harness: cancellation sweeps and the invariants every turn must keep.

A *subject* is one operation call on a freshly built Branch. :func:`sweep` runs it once per
scheduling point: the call runs in a task while a ticker task passes ``k`` checkpoints and then
cancels the call's scope, for ``k = 0, 1, 2, ...`` until the call completes uncancelled (works
on both backends). On trio, ``steps=True`` instead cancels after the ``k``-th step of the call's
task tree, counted by a trio instrument, which walks every step exactly.

After every attempt the checks below hold what the ADR promises -- one terminal per started
turn and none otherwise, matching the outcome; lock free; no active context; no leftover task,
binding or process; the history a prefix of a completed call's, in whole messages; one message
signal per recorded message, before the terminal -- and the Branch must serve one more turn
normally. Checks return lists of violations rather than asserting, so the same code feeds the
tests and the full-size runner.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import sniffio
from anyio.lowlevel import checkpoint

from lionagi.operations.turn import _active_turn_var
from lionagi.protocols.messages import ActionRequest, ActionResponse, AssistantResponse, Message
from lionagi.service.providers.base import Provider
from lionagi.service.types import FinalChunk, ModelRequest, ModelResponse, StreamChunk, TextDelta
from lionagi.session.branch import Branch
from lionagi.session.signal import RunEnd, RunFailed, RunStart
from tests.helpers import Recorder

__all__ = [
    "SECRET",
    "Attempt",
    "EchoProvider",
    "Subject",
    "SweepReport",
    "backend",
    "branch_violations",
    "history_violations",
    "process_violations",
    "run_attempt",
    "spying_processes",
    "sweep",
    "turn_violations",
    "wire_violations",
]

#: the API key every suite uses; it must never appear in anything the library produces
SECRET = "sk-test-SECRET-6b1f9e0c2d4a8"


class EchoProvider(Provider):
    """A lean offline provider for load: one checkpoint, a fixed reply, nothing recorded.

    ``lionagi.testing`` models keep every request; at load sizes that is memory the harness
    would have to subtract, so the load scenarios use this instead.
    """

    name = "echo"

    def __init__(self, *, model: str = "echo", reply: str = "ok", **kwargs: Any) -> None:
        super().__init__(model=model, **kwargs)
        self.reply = reply

    def clone(self) -> EchoProvider:
        return EchoProvider(model=self.model, reply=self.reply)

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        await checkpoint()
        return ModelResponse(text=self.reply, model=self.model, provider=self.name)

    async def stream(self, request: ModelRequest) -> Any:
        await checkpoint()
        yield TextDelta(text=self.reply)
        chunk: StreamChunk = FinalChunk(
            response=ModelResponse(text=self.reply, model=self.model, provider=self.name)
        )
        yield chunk


# -- subjects -------------------------------------------------------------------------------------
@dataclass
class Subject:
    """One operation call to attack, on a Branch built for this attempt alone.

    ``call`` runs the operation; ``check`` inspects a completed call's result (raise
    AssertionError on a wrong one); ``followup`` is the next ordinary turn, whose result must
    equal ``followup_result``. ``processes`` lists subprocesses the attempt started (filled by
    the subject's own spy), ``aclose`` releases models and servers.
    """

    branch: Branch
    recorder: Recorder
    call: Callable[[Branch], Awaitable[Any]]
    check: Callable[[Any], None] = lambda result: None
    followup: Callable[[Branch], Awaitable[Any]] = field(
        default=lambda branch: branch.chat_and_record("follow-up")
    )
    followup_result: Any = "ok"
    processes: list[Any] = field(default_factory=list)
    aclose: Callable[[], Awaitable[None]] | None = None
    #: message kinds a completed call appends (computed by the sweep from a clean run)
    reference: tuple[str, ...] | None = None
    #: the operation records a reply and its tool calls at once (False for streamed ``run``)
    atomic_replies: bool = True
    #: the operation commits its instruction only with a reply (False for synthetic turn bodies
    #: that record instructions themselves)
    instruction_with_reply: bool = True
    #: also check that the history renders into a request strict providers accept
    wire: bool = False


@dataclass
class Attempt:
    """What one attempt observed."""

    k: int
    cancel_requested: bool = False
    cancelled: bool = False
    completed: bool = False
    started: bool = False
    error: BaseException | None = None
    terminal: RunEnd | RunFailed | None = None
    violations: list[str] = field(default_factory=list)
    #: why the history would not make a request strict providers accept (when checked)
    wire: list[str] = field(default_factory=list)


@dataclass
class SweepReport:
    """The outcome of a sweep over one subject's scheduling points."""

    name: str
    points: int = 0  # scheduling points of one call: ticks needed to complete uncancelled
    attempts: int = 0
    cancelled_before_start: int = 0
    cancelled_after_start: int = 0
    completed: int = 0
    violations: list[str] = field(default_factory=list)
    #: attempts after which the history would not make a request strict providers accept
    wire_broken: int = 0
    wire_examples: list[str] = field(default_factory=list)

    def add(self, attempt: Attempt) -> None:
        self.attempts += 1
        if attempt.wire:
            self.wire_broken += 1
            if len(self.wire_examples) < 3:
                self.wire_examples.append(f"k={attempt.k}: {attempt.wire[0]}")
        if attempt.completed:
            self.completed += 1
        elif attempt.cancelled and attempt.started:
            self.cancelled_after_start += 1
        elif attempt.cancelled:
            self.cancelled_before_start += 1
        self.violations.extend(f"{self.name} k={attempt.k}: {v}" for v in attempt.violations)


def _kinds(messages: Sequence[Message]) -> tuple[str, ...]:
    return tuple(type(m).__name__ for m in messages)


# -- invariants -----------------------------------------------------------------------------------
def branch_violations(branch: Branch) -> list[str]:
    """The Branch is idle: no active context, the lock free with nobody waiting."""
    found: list[str] = []
    if branch._active_turn_context is not None:
        found.append(f"active context left behind: {branch._active_turn_context!r}")
    lock = branch._turn_lock
    if lock.locked():
        found.append("turn lock still held")
    if lock.tasks_waiting:
        found.append(f"{lock.tasks_waiting} task(s) still waiting on the lock")
    return found


def process_violations(processes: Sequence[Any]) -> list[str]:
    """Every subprocess was reaped and is gone."""
    found: list[str] = []
    for process in processes:
        if process.returncode is None:
            found.append(f"process {process.pid} was not reaped")
            continue
        try:
            os.kill(process.pid, 0)
        except ProcessLookupError:
            continue
        found.append(f"process {process.pid} still exists")
    return found


def history_violations(
    added: Sequence[Message],
    reference: Sequence[str] | None,
    *,
    atomic_replies: bool = True,
    instruction_with_reply: bool = True,
) -> list[str]:
    """Messages a cut-short turn appended are whole: a prefix of what a completed call appends,
    each tool result after its call, and (``atomic_replies``: operations that record a reply
    together with its tool calls) never cut between a reply and its tool calls. ``run`` commits
    streamed text and each tool call as messages of their own, so it passes False. An
    instruction is committed only together with its first reply, so it never ends the messages."""
    found: list[str] = []
    kinds = _kinds(added)
    if reference is not None:
        if tuple(reference[: len(kinds)]) != kinds:
            found.append(f"history {kinds} is not a prefix of a completed call's {reference}")
        elif (
            atomic_replies
            and kinds
            and len(kinds) < len(reference)
            and reference[len(kinds)] == "ActionRequest"
            and kinds[-1] in ("AssistantResponse", "ActionRequest")
        ):
            found.append(f"history cut inside an assistant reply's tool calls: {kinds}")
    if instruction_with_reply and kinds and kinds[-1] == "Instruction":
        found.append(f"an instruction was committed without a reply: {kinds}")
    requests: dict[str, ActionRequest] = {}
    answered: set[str] = set()
    for message in added:
        if isinstance(message, ActionRequest):
            requests[message.call_id] = message
        elif isinstance(message, ActionResponse):
            request = requests.get(message.call_id)
            if request is None or request.id != message.request_id:
                found.append(f"tool result {message.call_id!r} without its preceding request")
            if message.call_id in answered:
                found.append(f"tool call {message.call_id!r} answered twice")
            answered.add(message.call_id)
    if added and isinstance(added[0], AssistantResponse | ActionResponse):
        found.append(f"turn recorded {type(added[0]).__name__} before its instruction")
    return found


def wire_violations(history: Sequence[Message]) -> list[str]:
    """The next request built from ``history`` is one OpenAI and Anthropic accept: every tool
    call of an assistant message is answered by a tool result before anything else follows."""
    from lionagi.protocols.messages import Instruction
    from lionagi.service.providers._anthropic_render import to_anthropic_messages
    from lionagi.service.providers._openai_render import to_openai_messages

    found: list[str] = []
    messages = [*history, Instruction(instruction="next")]
    pending: set[str] = set()
    for part in to_openai_messages(messages):
        if part["role"] == "tool":
            if part["tool_call_id"] not in pending:
                found.append(f"openai: tool result {part['tool_call_id']!r} answers no open call")
            pending.discard(part["tool_call_id"])
            continue
        if pending:
            found.append(
                f"openai: tool calls {sorted(pending)} unanswered before a {part['role']} message"
            )
        pending = {call["id"] for call in part.get("tool_calls") or ()}
    _, turns = to_anthropic_messages(messages)
    for index, turn in enumerate(turns):
        blocks = turn["content"] if isinstance(turn["content"], list) else []
        uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
        if not uses:
            continue
        following = turns[index + 1]["content"] if index + 1 < len(turns) else []
        results = {b.get("tool_use_id") for b in following if isinstance(b, dict)}
        if not uses <= results:
            found.append(
                f"anthropic: tool_use {sorted(uses - results)} without tool_result right after"
            )
    return found


def turn_violations(
    recorder: Recorder,
    *,
    outcome: str,
    error: BaseException | None,
    added: Sequence[Message],
) -> list[str]:
    """Lifecycle signals of one call that ended with ``outcome`` ("returned", "raised" or
    "cancelled"): at most one turn, exactly one terminal if it started and none otherwise,
    the terminal matching the outcome and after every message signal of the turn."""
    found: list[str] = []
    starts = recorder.starts()
    terminals = recorder.terminals()
    messages = recorder.messages()
    if len(starts) > 1:
        found.append(f"{len(starts)} RunStart signals for one call")
    if not starts:
        if terminals:
            found.append(f"terminal {terminals[0].kind} without RunStart")
        if messages or added:
            found.append("messages recorded without a turn")
        return found
    turn_id = starts[0].turn_id
    mine = [t for t in terminals if t.turn_id == turn_id]
    if len(mine) != 1 or len(terminals) != 1:
        found.append(f"{len(mine)} terminal(s) for turn {turn_id} ({recorder.kinds()})")
        return found
    terminal = mine[0]
    position = {id(s): i for i, s in enumerate(recorder.signals)}
    if any(position[id(m)] > position[id(terminal)] for m in messages):
        found.append("a message signal came after the terminal")
    if [m.message.id for m in messages] != [m.id for m in added]:
        found.append(f"message signals {len(messages)} do not match recorded messages {len(added)}")
    if any(m.turn_id != turn_id for m in messages):
        found.append("a message signal carries another turn id")
    if outcome == "returned" and not isinstance(terminal, RunEnd):
        found.append(f"call returned but the terminal is {terminal.kind}")
    if outcome == "cancelled":
        if not isinstance(terminal, RunFailed):
            found.append(f"call was cancelled but the terminal is {terminal.kind}")
        elif not isinstance(terminal.data, anyio.get_cancelled_exc_class()):
            found.append(f"RunFailed after cancellation carries {terminal.data!r}")
    if (
        outcome == "raised"
        and error is not None
        and isinstance(terminal, RunFailed)
        and terminal.data is not error
    ):
        found.append(f"RunFailed carries {terminal.data!r}, the call raised {error!r}")
    return found


# -- the sweep ------------------------------------------------------------------------------------
class _StepCanceller:
    """A trio instrument that cancels ``scope`` after the ``n``-th step of the call's task tree
    (the call's task and every task started below it); it counts steps either way."""

    def __init__(self, n: int | None, scope: anyio.CancelScope) -> None:
        self.n = n
        self.scope = scope
        self.tree: set[Any] = set()
        self.steps = 0
        self.fired = False

    def task_spawned(self, task: Any) -> None:
        nursery = task.parent_nursery
        if nursery is not None and nursery.parent_task in self.tree:
            self.tree.add(task)

    def after_task_step(self, task: Any) -> None:
        if task in self.tree:
            self.steps += 1
            if self.steps == self.n:
                self.fired = True
                self.scope.cancel()


async def run_attempt(
    make: Callable[[], Awaitable[Subject]], k: int | None, *, steps: bool = False
) -> tuple[Attempt, Any]:
    """Run one call, cancelling it after ``k`` ticks (never when ``k`` is None), or with
    ``steps`` (trio only) after the ``k``-th step of its task tree."""
    subject = await make()
    attempt = Attempt(k=-1 if k is None else k)
    branch = subject.branch
    before = len(branch.msgs)
    baseline = len(anyio.get_running_tasks())
    scope = anyio.CancelScope()
    finished = anyio.Event()
    box: dict[str, Any] = {}
    instrument = _StepCanceller(k, scope) if steps else None

    async def call() -> None:
        if instrument is not None:
            import trio

            instrument.tree.add(trio.lowlevel.current_task())
        try:
            with scope:
                box["result"] = await subject.call(branch)
        except Exception as exc:
            box["error"] = exc
        finally:
            box["binding"] = _active_turn_var.get()
            finished.set()

    try:
        if instrument is not None:
            import trio

            trio.lowlevel.add_instrument(instrument)  # type: ignore[arg-type]
            if k == 0:
                attempt.cancel_requested = True
                scope.cancel()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                if k is not None and instrument is None:
                    threads = anyio.to_thread.current_default_thread_limiter()
                    for _ in range(k):
                        if finished.is_set():
                            break
                        await _worker_threads_done(threads)
                        await checkpoint()
                    if not finished.is_set():
                        attempt.cancel_requested = True
                        scope.cancel()
        finally:
            if instrument is not None:
                import trio

                trio.lowlevel.remove_instrument(instrument)  # type: ignore[arg-type]
                attempt.cancel_requested = attempt.cancel_requested or instrument.fired
        kinds = await _judge(subject, attempt, box, scope, before, baseline)
        return attempt, kinds
    finally:
        if subject.aclose is not None:
            with anyio.CancelScope(shield=True):
                await subject.aclose()


async def _worker_threads_done(threads: anyio.CapacityLimiter) -> None:
    """Return once no worker thread of ``threads`` runs: a sync tool's run in a worker thread
    counts as one tick, however long the thread takes (else the ticks a call needs would
    depend on how fast the machine runs the thread against this task's checkpoints). The
    calling task releases its thread's token when it resumes, so this returns once the call
    has gone on to its next scheduling point."""
    while threads.statistics().borrowed_tokens:
        await checkpoint()


async def _judge(
    subject: Subject,
    attempt: Attempt,
    box: dict[str, Any],
    scope: anyio.CancelScope,
    before: int,
    baseline: int,
) -> tuple[str, ...]:
    """Record in ``attempt`` what the finished attempt violated; then run the follow-up turn.
    Returns the kinds of the messages the call appended."""
    branch = subject.branch
    found = attempt.violations
    added = branch.msgs[before:]
    attempt.started = bool(subject.recorder.starts())
    attempt.terminal = next(iter(subject.recorder.terminals()), None)
    attempt.cancelled = scope.cancelled_caught
    attempt.error = box.get("error")
    if attempt.cancelled:
        outcome = "cancelled"
    elif "error" in box:
        outcome = "raised"
        if attempt.cancel_requested:
            found.append(f"cancellation was turned into {box['error']!r}")
        else:
            found.append(f"call failed: {box['error']!r}")
    else:
        outcome = "returned"
        attempt.completed = True
        try:
            subject.check(box["result"])
        except AssertionError as exc:
            found.append(f"wrong result {box['result']!r}: {exc}")
    if box.get("binding") is not None:
        found.append("the caller's task kept a turn binding")
    found += turn_violations(subject.recorder, outcome=outcome, error=attempt.error, added=added)
    reference = subject.reference
    if attempt.completed and reference is not None and _kinds(added) != tuple(reference):
        found.append(f"completed call appended {_kinds(added)}, expected {reference}")
    found += history_violations(
        added,
        reference,
        atomic_replies=subject.atomic_replies,
        instruction_with_reply=subject.instruction_with_reply,
    )
    if subject.wire:
        attempt.wire = wire_violations(branch.msgs)
    found += branch_violations(branch)
    if len(anyio.get_running_tasks()) != baseline:
        found.append(
            f"{len(anyio.get_running_tasks()) - baseline} task(s) left behind "
            f"({[t.name for t in anyio.get_running_tasks()]})"
        )
    found += process_violations(subject.processes)
    if not found:
        found += await _followup(subject)
    return _kinds(added)


async def _followup(subject: Subject) -> list[str]:
    """The Branch serves the next turn normally after whatever happened."""
    branch = subject.branch
    recorder = subject.recorder
    seen = len(recorder.signals)
    try:
        result = await subject.followup(branch)
    except Exception as exc:
        return [f"the next turn failed: {exc!r}"]
    found: list[str] = []
    if result != subject.followup_result:
        found.append(f"the next turn returned {result!r}, expected {subject.followup_result!r}")
    kinds = [
        s.kind for s in recorder.signals[seen:] if isinstance(s, RunStart | RunEnd | RunFailed)
    ]
    if kinds != ["RunStart", "RunEnd"]:
        found.append(f"the next turn signalled {kinds}")
    found += branch_violations(branch)
    found += process_violations(subject.processes)
    return found


def ticks(limit: int, *, geometric: bool) -> list[int]:
    """The cancellation points to try: every tick, or 0, 1, 2, 3, 5, 8, ... for I/O subjects
    whose calls wait on a server or process for many ticks."""
    if not geometric:
        return list(range(limit + 1))
    out = [0, 1, 2]
    while out[-1] < limit:
        out.append(min(limit, out[-1] + out[-2]))
    return out


async def sweep(
    name: str,
    make: Callable[[], Awaitable[Subject]],
    *,
    limit: int = 400,
    confirm: int = 2,
    geometric: bool = False,
    repeats: int | None = None,
    steps: bool = False,
    wire: bool = False,
) -> SweepReport:
    """Cancel one call at each of its scheduling points in turn (see the module docstring).

    trio runs the ready tasks of one scheduling round in a varying order, so there every tick
    is tried ``repeats`` times (default 3; 1 on asyncio, whose order is fixed). The sweep ends
    after ``confirm`` consecutive ticks at which every try completed before the cancellation,
    or at ``limit`` ticks, which is a violation: the call never finished.

    With ``steps`` (trio only) the call is cancelled after the k-th step of its task tree
    instead, counted by a trio instrument: an exact, ordered walk over every step. With
    ``wire`` each attempt also renders the history into provider requests and counts those a
    strict provider would reject (``wire_broken``), without failing the attempt.
    """
    if repeats is None:
        repeats = 3 if backend() == "trio" else 1
    report = SweepReport(name)
    reference_attempt, reference = await run_attempt(make, None, steps=steps)
    report.add(reference_attempt)
    if reference_attempt.violations or not reference_attempt.completed:
        report.violations.append(f"{name}: the uncancelled call failed")
        return report

    async def with_reference() -> Subject:
        subject = await make()
        subject.reference = reference
        subject.wire = wire
        return subject

    streak = 0
    for k in ticks(limit, geometric=geometric):
        untouched = True
        for _ in range(repeats):
            attempt, _ = await run_attempt(with_reference, k, steps=steps)
            report.add(attempt)
            untouched = untouched and attempt.completed and not attempt.cancel_requested
        if untouched:
            streak += 1
            if report.points == 0:
                report.points = k
            if streak >= confirm:
                return report
        else:
            streak = 0
            report.points = 0
    report.violations.append(f"{name}: the call did not complete within {limit} ticks")
    return report


def backend() -> str:
    """The running backend's name: "asyncio" or "trio"."""
    return sniffio.current_async_library()


@contextlib.contextmanager
def spying_processes(processes: list[Any]) -> Any:
    """Record every process ``anyio.open_process`` starts while the block runs."""
    real = anyio.open_process

    async def spy(*args: Any, **kwargs: Any) -> Any:
        process = await real(*args, **kwargs)
        processes.append(process)
        return process

    anyio.open_process = spy
    try:
        yield processes
    finally:
        anyio.open_process = real
