"""Random interleavings of turns for the turn-protocol property tests (ADR-0018).

Hypothesis draws a scenario: callers running coroutine or stream turns on one to three branches,
out-of-band controls (right, wrong, stale or no turn id), observers that are slow, fail or call
their Branch again, bodies that raise, nest calls or start child work, streams that end in every way
a consumer can end them (exhausted, closed, closed from another task while an item is being
produced, left through ``async with``, abandoned and then followed by another call), and
cancellations of random callers after a random number of checkpoints. :class:`ScenarioRun` plays it
in one event loop, with anyio only, so the same runner serves every backend
(``tests/operations/test_turn_properties.py``) and trio's seeded scheduler
(``tests_trio/test_turn_properties.py``). It then checks the invariants: per branch, turns never
overlap and each RunStart has exactly one terminal that matches the caller's outcome; each message
signal falls inside its own turn; the history is whole messages in contiguous per-turn blocks; and
afterwards the lock is free with no turn and no binding left behind.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from uuid import UUID, uuid4

import anyio
from anyio.lowlevel import checkpoint
from hypothesis import strategies as st

from lionagi.operations.turn import (
    TurnFinalizingError,
    TurnStream,
    _active_turn_var,
    run_in_turn,
    stream_in_turn,
)
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import Instruction
from lionagi.session.branch import Branch
from lionagi.session.control import LoopBreak, LoopDirective, StopStream, check_control
from lionagi.session.session import Session
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart, Signal
from tests.helpers import Recorder, echo_model

# -- scenarios -------------------------------------------------------------------------------
ChildKind = Literal["finishes", "hangs"]
Target = Literal["right", "wrong", "none", "stale"]
# how a stream consumer ends its stream: aclose() itself, aclose() from another task after the
# loop, aclose() from another task while the loop runs, leaving an ``async with`` block, or
# dropping the stream without closing it and calling the Branch again
Ending = Literal["aclose", "elsewhere", "close_during", "async_with", "abandon"]


@dataclass(frozen=True)
class CallerSpec:
    """One caller: a coroutine turn or a consumed stream turn on ``branch``."""

    branch: int
    stream: bool
    items: int  # messages the body records (and, for a stream, items it yields)
    body_checkpoints: int  # checkpoints after each item
    fail_at: int | None  # the body raises BodyError instead of producing this item
    delay: int  # checkpoints before the call
    cancel_after: int | None  # checkpoints after which another task cancels the caller
    nest_same: bool  # the body makes a nested call on its own branch
    nest_other: bool  # the body runs a turn on the next branch (if there is one)
    child: ChildKind | None  # nested work the body starts with scope.start_soon
    break_after: int | None  # a stream consumer stops after this many items
    ending: Ending
    consumer_checkpoints: int


@dataclass(frozen=True)
class ControlSpec:
    """An out-of-band ``branch.control()`` from a task that does not inherit any turn."""

    branch: int
    delay: int
    directive: LoopDirective
    target: Target


@dataclass(frozen=True)
class ObserverSpec:
    message_checkpoints: int
    message_fails: bool
    message_control: LoopDirective | None  # a MessageAdded handler controls that message's turn
    start_fails: bool
    terminal_checkpoints: int
    terminal_fails: bool
    terminal_reenters: bool  # a terminal handler calls its Branch again (TurnFinalizingError)
    message_reenters: bool  # a MessageAdded handler calls its Branch (nested, or finalizing)
    start_reenters: bool  # a RunStart handler calls its Branch (nested)


@dataclass(frozen=True)
class Scenario:
    branches: int
    callers: tuple[CallerSpec, ...]
    controls: tuple[ControlSpec, ...]
    observer: ObserverSpec


_directives = st.sampled_from(list(LoopDirective))


def _caller_specs(branches: int) -> st.SearchStrategy[CallerSpec]:
    return st.builds(
        CallerSpec,
        branch=st.integers(0, branches - 1),
        stream=st.booleans(),
        items=st.integers(0, 3),
        body_checkpoints=st.integers(0, 3),
        fail_at=st.none() | st.integers(0, 3),
        delay=st.integers(0, 6),
        cancel_after=st.none() | st.integers(0, 40),
        nest_same=st.booleans(),
        nest_other=st.booleans(),
        child=st.none() | st.sampled_from(["finishes", "hangs"]),
        break_after=st.none() | st.integers(1, 3),
        ending=st.sampled_from(["aclose", "elsewhere", "close_during", "async_with", "abandon"]),
        consumer_checkpoints=st.integers(0, 2),
    )


def _control_specs(branches: int) -> st.SearchStrategy[ControlSpec]:
    return st.builds(
        ControlSpec,
        branch=st.integers(0, branches - 1),
        delay=st.integers(0, 40),
        directive=_directives,
        target=st.sampled_from(["right", "wrong", "none", "stale"]),
    )


_observer_specs = st.builds(
    ObserverSpec,
    message_checkpoints=st.integers(0, 3),
    message_fails=st.booleans(),
    message_control=st.none() | _directives,
    start_fails=st.booleans(),
    terminal_checkpoints=st.integers(0, 3),
    terminal_fails=st.booleans(),
    terminal_reenters=st.booleans(),
    message_reenters=st.booleans(),
    start_reenters=st.booleans(),
)


@st.composite
def scenarios(draw: st.DrawFn, max_callers: int = 6) -> Scenario:
    branches = draw(st.integers(1, 3))
    return Scenario(
        branches=branches,
        callers=tuple(draw(st.lists(_caller_specs(branches), min_size=1, max_size=max_callers))),
        controls=tuple(draw(st.lists(_control_specs(branches), max_size=4))),
        observer=draw(_observer_specs),
    )


# -- the runner -----------------------------------------------------------------------------
class BodyError(Exception):
    """What a body raises at ``fail_at``."""


class HandlerError(Exception):
    """What a failing observer handler raises (logged by the observer, never propagated)."""


async def _checkpoints(n: int) -> None:
    for _ in range(n):
        await checkpoint()


@dataclass
class Outcome:
    stream: bool
    error: BaseException | None


@dataclass
class AcceptedControl:
    turn_id: UUID
    directive: LoopDirective
    reason: str


@dataclass
class ScenarioRun:
    """Plays one :class:`Scenario` in the running event loop and checks it afterwards."""

    scenario: Scenario
    session: Session = field(default_factory=Session)
    recorder: Recorder = field(default_factory=Recorder)
    branches: list[Branch] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    entry_lengths: dict[str, int] = field(default_factory=dict)
    accepted: list[AcceptedControl] = field(default_factory=list)
    inside: list[int] = field(default_factory=list)
    scopes: list[anyio.CancelScope] = field(default_factory=list)
    stream_bodies: list[AsyncGenerator[int, None]] = field(default_factory=list)
    deadlocked: bool = False
    cancelled: type[BaseException] = BaseException  # the backend's cancellation class

    def __post_init__(self) -> None:
        self.session.observe(Signal, self.recorder)  # first: records before other handlers run
        self.branches = [
            self.session.new_branch(chat_model=echo_model(), name=f"b{i}")
            for i in range(self.scenario.branches)
        ]
        self.inside = [0] * self.scenario.branches
        observer = self.scenario.observer
        self.session.observe(MessageAdded, self._on_message)
        if observer.start_reenters:
            self.session.observe(RunStart, self._on_start)
        if observer.start_fails:
            self.session.observe(RunStart, self._fail_handler)
        self.session.observe(RunEnd, self._on_terminal)
        self.session.observe(RunFailed, self._on_terminal)

    def violation(self, text: str) -> None:
        self.violations.append(text)

    def _branch(self, branch_id: UUID | None) -> Branch:
        [branch] = [b for b in self.branches if b.id == branch_id]
        return branch

    # -- observers ---------------------------------------------------------------------------
    async def _on_message(self, signal: MessageAdded, _: Any) -> None:
        spec = self.scenario.observer
        await _checkpoints(spec.message_checkpoints)
        if spec.message_control is not None and signal.turn_id is not None:
            self._control(
                self._branch(signal.branch_id), spec.message_control, signal.turn_id, "observer"
            )
        if spec.message_reenters and signal.turn_id is not None:
            await self._reenter(self._branch(signal.branch_id), signal.turn_id, "message")
        if spec.message_fails:
            raise HandlerError("message handler failed")

    async def _on_start(self, signal: RunStart, _: Any) -> None:
        assert signal.turn_id is not None
        await self._reenter(self._branch(signal.branch_id), signal.turn_id, "start")

    async def _reenter(self, branch: Branch, turn_id: UUID, source: str) -> None:
        """A handler's call on its Branch during the turn: nested in that turn, or refused with
        TurnFinalizingError once the turn finalizes; never a turn of its own, never a hang."""

        async def body(scope: TurnScope) -> None:
            if scope.owns_lifecycle or scope.turn_id != turn_id:
                self.violation(f"a {source} handler's call did not join turn {turn_id}")
            await checkpoint()

        with contextlib.suppress(TurnFinalizingError, LoopBreak, StopStream):
            await run_in_turn(branch, model=None, invoke=body, operation=f"{source}-handler")

    def _fail_handler(self, signal: Signal, _: Any) -> None:
        raise HandlerError(f"{signal.kind} handler failed")

    async def _on_terminal(self, signal: RunEnd | RunFailed, _: Any) -> None:
        spec = self.scenario.observer
        await _checkpoints(spec.terminal_checkpoints)
        if spec.terminal_reenters:
            branch = self._branch(signal.branch_id)
            try:
                await run_in_turn(branch, model=None, invoke=self._unreachable, operation="re")
            except TurnFinalizingError:
                pass
            else:
                self.violation(f"terminal handler re-entered {branch.name} without an error")
        if spec.terminal_fails:
            raise HandlerError("terminal handler failed")

    async def _unreachable(self, scope: TurnScope) -> None:
        self.violation("a terminal handler's re-entry ran a body")

    # -- controls ----------------------------------------------------------------------------
    def _control(
        self, branch: Branch, directive: LoopDirective, turn_id: UUID | None, reason: str
    ) -> bool:
        context = branch._active_turn_context
        expected = (
            context is not None
            and context.phase == "active"
            and (turn_id is None or turn_id == context.turn_id)
        )
        verdict = branch.control(directive, turn_id=turn_id, reason=reason)
        if verdict != expected:
            self.violation(f"control({directive}, {turn_id}) on {branch.name} returned {verdict}")
        if verdict:
            assert context is not None
            self.accepted.append(AcceptedControl(context.turn_id, directive, reason))
        return verdict

    async def _controller(self, index: int, spec: ControlSpec) -> None:
        await _checkpoints(spec.delay)
        branch = self.branches[spec.branch]
        context = branch._active_turn_context
        turn_id: UUID | None
        if spec.target == "right":
            turn_id = None if context is None else context.turn_id
        elif spec.target == "none":
            turn_id = None
        elif spec.target == "stale":
            ended = [t.turn_id for t in self.recorder.terminals() if t.branch_id == branch.id]
            turn_id = ended[-1] if ended else uuid4()
        else:
            turn_id = uuid4()
        verdict = self._control(branch, spec.directive, turn_id, f"control {index}")
        if verdict and spec.target in ("wrong", "stale"):
            self.violation(f"a {spec.target} control was accepted on {branch.name}")

    # -- bodies ------------------------------------------------------------------------------
    def _enter(self, label: str, b: int, scope: TurnScope) -> None:
        branch = self.branches[b]
        if not scope.owns_lifecycle:
            self.violation(f"{label}: a caller's body does not own its turn")
        if self.inside[b]:
            self.violation(f"{label}: entered {branch.name} while another turn was inside")
        self.inside[b] += 1
        self.entry_lengths[label] = len(branch.msgs)
        binding = _active_turn_var.get()
        if branch._active_turn_context is not scope.context or scope.context.phase != "active":
            self.violation(f"{label}: the Branch does not point at the running turn")
        if binding is None or binding.scope.context is not scope.context:
            self.violation(f"{label}: the body runs without its turn's binding")

    def _record(self, label: str, b: int, source: str, index: int) -> None:
        self.branches[b].msgs.add(Instruction(instruction=f"{label}|{source}|{index}"))

    async def _child(self, label: str, b: int, kind: ChildKind) -> None:
        await checkpoint()
        self._record(label, b, "child", 0)
        if kind == "hangs":
            await anyio.sleep_forever()

    async def _nested(self, label: str, b: int, outer: TurnScope) -> None:
        async def body(scope: TurnScope) -> None:
            if scope.owns_lifecycle or scope.context is not outer.context:
                self.violation(f"{label}: a nested call did not share its turn")
            self._record(label, b, "nested", 0)
            await checkpoint()

        await run_in_turn(self.branches[b], model=None, invoke=body, operation=label)

    async def _plain_call(self, label: str, b: int, body_checkpoints: int) -> None:
        """A one-message coroutine turn on branch ``b``; its outcome is checked under ``label``."""
        spec = CallerSpec(
            branch=b,
            stream=False,
            items=1,
            body_checkpoints=body_checkpoints,
            fail_at=None,
            delay=0,
            cancel_after=None,
            nest_same=False,
            nest_other=False,
            child=None,
            break_after=None,
            ending="aclose",
            consumer_checkpoints=0,
        )
        with contextlib.suppress(BodyError, LoopBreak, StopStream):
            await self._call(label, spec)

    async def _nest_other(self, label: str, b: int) -> None:
        if b + 1 < len(self.branches):
            await self._plain_call(f"{label}>b{b + 1}", b + 1, body_checkpoints=1)

    async def _call_after_abandoning(self, label: str, b: int) -> None:
        """The consumer of an abandoned stream calls its Branch again: a turn of its own."""
        await self._plain_call(f"{label}+", b, body_checkpoints=0)

    def _coroutine_body(
        self, label: str, spec: CallerSpec
    ) -> Callable[[TurnScope], Awaitable[str]]:
        b = spec.branch

        async def body(scope: TurnScope) -> str:
            self._enter(label, b, scope)
            try:
                if spec.child is not None:
                    scope.start_soon(self._child, label, b, spec.child)
                for i in range(spec.items):
                    check_control(scope)
                    if spec.fail_at == i:
                        raise BodyError(label)
                    self._record(label, b, "body", i)
                    await _checkpoints(spec.body_checkpoints)
                if spec.nest_same:
                    await self._nested(label, b, scope)
                if spec.nest_other:
                    await self._nest_other(label, b)
                check_control(scope)
                return label
            finally:
                self.inside[b] -= 1

        return body

    def _stream_body(
        self, label: str, spec: CallerSpec
    ) -> Callable[[TurnScope], AsyncIterator[int]]:
        b = spec.branch

        async def body(scope: TurnScope) -> AsyncGenerator[int, None]:
            self._enter(label, b, scope)
            try:
                if spec.child is not None:
                    scope.start_soon(self._child, label, b, spec.child)
                for i in range(spec.items):
                    check_control(scope)
                    if spec.fail_at == i:
                        raise BodyError(label)
                    self._record(label, b, "body", i)
                    await _checkpoints(spec.body_checkpoints)
                    yield i
                if spec.nest_same:
                    await self._nested(label, b, scope)
                if spec.nest_other:
                    await self._nest_other(label, b)
            finally:
                self.inside[b] -= 1
                if self.branches[b]._active_turn_context is not scope.context:
                    self.violation(f"{label}: the stream body was closed after its turn ended")

        def invoke(scope: TurnScope) -> AsyncIterator[int]:
            generator = body(scope)
            self.stream_bodies.append(generator)
            return generator

        return invoke

    # -- callers -----------------------------------------------------------------------------
    async def _call(self, label: str, spec: CallerSpec) -> None:
        branch = self.branches[spec.branch]
        try:
            result = await run_in_turn(
                branch, model=None, invoke=self._coroutine_body(label, spec), operation=label
            )
        except BaseException as exc:
            self.outcomes[label] = Outcome(stream=False, error=exc)
            raise
        self.outcomes[label] = Outcome(stream=False, error=None)
        if result != label:
            self.violation(f"{label}: the result {result!r} was not returned unchanged")

    async def _consume(self, label: str, spec: CallerSpec) -> None:
        branch = self.branches[spec.branch]
        stream: TurnStream[int] | None = stream_in_turn(
            branch, model=None, invoke=self._stream_body(label, spec), operation=label
        )
        assert stream is not None
        items: list[int] = []
        failure: Exception | None = None  # what the stream raised, when a cancellation follows

        async def loop(source: TurnStream[int]) -> None:
            async for item in source:
                items.append(item)
                await _checkpoints(spec.consumer_checkpoints)
                if spec.break_after is not None and len(items) >= spec.break_after:
                    break

        try:
            try:
                if spec.ending == "async_with":
                    async with stream as entered:
                        await loop(entered)
                elif spec.ending == "close_during":
                    async with anyio.create_task_group() as group:
                        group.start_soon(self._close_later, stream, spec.consumer_checkpoints)
                        try:
                            await loop(stream)
                        except Exception as exc:  # raised as itself, not in a group
                            failure = exc
                    if failure is not None:
                        raise failure
                else:
                    await loop(stream)
            except BaseException:
                await stream.aclose()
                raise
            if spec.ending == "elsewhere":
                async with anyio.create_task_group() as group:
                    group.start_soon(stream.aclose)
            elif spec.ending == "abandon":
                stream = None  # dropped unclosed: its turn is finalized on this event loop
            else:
                await stream.aclose()
        except BaseException as exc:
            self.outcomes[label] = Outcome(stream=True, error=failure or exc)
            raise
        finally:
            if items != list(range(len(items))):
                self.violation(f"{label}: the stream yielded {items}")
        self.outcomes[label] = Outcome(stream=True, error=None)
        if spec.ending == "abandon":
            await self._call_after_abandoning(label, spec.branch)

    async def _close_later(self, stream: TurnStream[int], after: int) -> None:
        await _checkpoints(after + 1)
        await stream.aclose()

    async def _caller(self, index: int, spec: CallerSpec) -> None:
        await _checkpoints(spec.delay)
        label = f"c{index}"
        try:
            with self.scopes[index]:
                if spec.stream:
                    await self._consume(label, spec)
                else:
                    await self._call(label, spec)
        except (BodyError, LoopBreak, StopStream):
            pass  # checked against the terminal signal afterwards
        except Exception as exc:
            self.violation(f"{label}: unexpected {type(exc).__name__}: {exc}")
        if _active_turn_var.get() is not None:
            self.violation(f"{label}: the caller's task kept a turn binding")

    async def _canceller(self, index: int, after: int) -> None:
        await _checkpoints(after)
        self.scopes[index].cancel()

    async def main(self) -> None:
        """Play the scenario (call this inside the event loop)."""
        self.scopes = [anyio.CancelScope() for _ in self.scenario.callers]
        self.cancelled = anyio.get_cancelled_exc_class()
        # A deadlock guard: with trio's autojumping MockClock it fires at once when every task
        # is blocked; on other clocks it is far beyond the test timeout.
        with anyio.move_on_after(10**6) as guard:
            async with anyio.create_task_group() as group:
                for index, spec in enumerate(self.scenario.callers):
                    group.start_soon(self._caller, index, spec)
                    if spec.cancel_after is not None:
                        group.start_soon(self._canceller, index, spec.cancel_after)
                for index, control in enumerate(self.scenario.controls):
                    group.start_soon(self._controller, index, control)
        self.deadlocked = guard.cancelled_caught
        # An abandoned stream is finalized by a task scheduled when it was dropped; a caller
        # cancelled while waiting behind it does not wait for that. Let it finish (bounded).
        for _ in range(1000):
            if all(branch._active_turn_context is None for branch in self.branches):
                break
            await checkpoint()
        for generator in self.stream_bodies:
            # a frame means suspended, not closed (ag_frame: on async generators, not in the ABC)
            if getattr(generator, "ag_frame", None) is not None:  # close it here, not in GC
                self.violation("a stream body was left suspended after its turn")
                await generator.aclose()
        if _active_turn_var.get() is not None:
            self.violation("the main task has a turn binding")

    # -- invariants ----------------------------------------------------------------------------
    def assert_invariants(self) -> None:
        """Check everything the ADR promises about what happened; fail with every violation."""
        assert not self.deadlocked, "the scenario deadlocked"
        for b, branch in enumerate(self.branches):
            self._check_branch(b, branch)
        self._check_outcomes()
        assert not self.violations, "\n".join(self.violations)

    def _check_branch(self, b: int, branch: Branch) -> None:
        name = branch.name
        signals = [s for s in self.recorder.signals if s.branch_id == branch.id]
        open_turn: UUID | None = None
        turn_of_message: dict[UUID, UUID] = {}
        for signal in signals:
            if isinstance(signal, RunStart):
                if open_turn is not None:
                    self.violation(f"{name}: RunStart({signal.turn_id}) while {open_turn} is open")
                open_turn = signal.turn_id
            elif isinstance(signal, RunEnd | RunFailed):
                if signal.turn_id != open_turn:
                    self.violation(f"{name}: terminal {signal.turn_id} while {open_turn} is open")
                open_turn = None
            elif isinstance(signal, MessageAdded):
                if signal.turn_id is None or signal.turn_id != open_turn:
                    self.violation(
                        f"{name}: MessageAdded of turn {signal.turn_id} outside it "
                        f"(open: {open_turn})"
                    )
                if signal.turn_id is not None:
                    turn_of_message[signal.message.id] = signal.turn_id
        if open_turn is not None:
            self.violation(f"{name}: turn {open_turn} never got a terminal signal")

        history = list(branch.msgs)
        delivered = [s.message.id for s in signals if isinstance(s, MessageAdded)]
        if delivered != [m.id for m in history]:
            self.violation(f"{name}: message signals differ from the history")
        starts = {
            s.operation: s.turn_id for s in self.recorder.starts() if s.branch_id == branch.id
        }
        blocks: list[str] = []
        counters: dict[tuple[str, str], int] = {}
        for position, message in enumerate(history):
            text = message.instruction if isinstance(message, Instruction) else None
            parts = (text or "").split("|")
            if len(parts) != 3:
                self.violation(f"{name}: foreign message {message!r}")
                continue
            label, source, index = parts
            if not blocks or blocks[-1] != label:
                if label in blocks:
                    self.violation(f"{name}: the messages of {label} are not contiguous")
                blocks.append(label)
                if self.entry_lengths.get(label) != position:
                    self.violation(f"{name}: {label} did not see exactly the earlier history")
            expected = counters.get((label, source), 0)
            if int(index) != expected:
                self.violation(f"{name}: {label}'s {source} message {index} is out of order")
            counters[(label, source)] = expected + 1
            if turn_of_message.get(message.id) != starts.get(label):
                self.violation(f"{name}: a message of {label} was signalled for another turn")
        start_order = [label for label in starts if label in blocks]
        if start_order != blocks:
            self.violation(f"{name}: history blocks {blocks} differ from start order")

        if branch._active_turn_context is not None:
            self.violation(f"{name}: a turn context is left on the Branch")
        lock = branch._turn_lock
        if lock.locked() or lock.tasks_waiting:
            self.violation(f"{name}: the turn lock is not free")
        if self.inside[b]:
            self.violation(f"{name}: a body never exited")

    def _check_outcomes(self) -> None:
        starts = {s.operation: s for s in self.recorder.starts()}
        terminals: dict[UUID | None, list[RunEnd | RunFailed]] = {}
        for terminal in self.recorder.terminals():
            terminals.setdefault(terminal.turn_id, []).append(terminal)
        for label in starts:
            if label not in self.outcomes:
                self.violation(f"{label}: a turn started that no caller saw end")
        for label, outcome in self.outcomes.items():
            error = outcome.error
            start = starts.get(label)
            if start is None:
                if not isinstance(error, self.cancelled):
                    self.violation(f"{label}: no RunStart, yet the caller got {error!r}")
                continue
            found = terminals.get(start.turn_id, [])
            if len(found) != 1:
                self.violation(f"{label}: {len(found)} terminal signals")
                continue
            [terminal] = found
            if error is None or isinstance(error, StopStream):
                ok = isinstance(terminal, RunEnd)
            elif isinstance(error, self.cancelled):
                failed_by_cancel = isinstance(terminal, RunFailed) and isinstance(
                    terminal.data, self.cancelled
                )
                # a consumer cancelled between items closes its stream: RunEnd is fine then
                ok = failed_by_cancel or (outcome.stream and isinstance(terminal, RunEnd))
            elif isinstance(error, BodyError | LoopBreak):
                ok = isinstance(terminal, RunFailed) and terminal.data is error
            else:
                ok = False
            if not ok:
                self.violation(
                    f"{label}: the caller got {error!r} but the terminal is {terminal!r}"
                )
            if isinstance(error, LoopBreak | StopStream) and error.control is not None:
                control = error.control
                if control.turn_id != start.turn_id:
                    self.violation(f"{label}: a directive for {control.turn_id} stopped it")
                if not any(
                    a.turn_id == control.turn_id and a.directive is control.directive
                    for a in self.accepted
                ):
                    self.violation(f"{label}: stopped by a directive nobody issued to it")
