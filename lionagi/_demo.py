"""The demo behind ``python -m lionagi demo``: a timeline of turns on one Branch.

It shows, one event per line: several callers queuing on one Branch (their turns never
interleave), a tool call inside a turn (``operate``), a streamed ``run`` handing out each
committed message, and an observer stopping a streamed run with a CANCEL directive (the turn
still ends with ``RunEnd``; a directive sent after the turn is rejected). Offline it runs on a
scripted :class:`~lionagi.testing.FunctionModel`; given provider settings it talks to a real
model.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TextIO
from uuid import UUID

import anyio

from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
    ToolCall,
)
from lionagi.service.imodel import iModel
from lionagi.service.types import ModelResponse
from lionagi.session.branch import Branch
from lionagi.session.control import LoopDirective
from lionagi.session.session import Session
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart, Signal
from lionagi.testing import FunctionModel, TestModel

__all__ = ["DemoConfig", "DemoSummary", "demo", "multiply", "offline_model", "run_demo"]

SYSTEM = "You are a concise assistant. Use the multiply tool for products."
CALLERS = ("A", "B", "C")
TOOL_QUESTION = "What is 6 x 7? Use the multiply tool."
STREAM_QUESTION = "Now multiply 12 by 12 and say the result."
CANCEL_QUESTION = "Think aloud about 7 x 8, then multiply it with the tool."

_caller: ContextVar[str | None] = ContextVar("lionagi_demo_caller", default=None)


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor
        b: the second factor
    """
    return a * b


# -- the offline model ---------------------------------------------------------------------
def _question(messages: Sequence[Message]) -> tuple[str, list[ActionResponse]]:
    """The newest question of the conversation and the tool results that answer it.

    An instruction right after a tool result (``operate``'s follow-up) is not a new question.
    """
    question = ""
    results: list[ActionResponse] = []
    previous: Message | None = None
    for message in messages:
        if isinstance(message, Instruction) and not isinstance(previous, ActionResponse):
            question = message.instruction or ""
            results = []
        elif isinstance(message, ActionResponse):
            results.append(message)
        previous = message
    return question, results


def _offline_reply(messages: Sequence[Message], **options: Any) -> str | ModelResponse | ToolCall:
    question, results = _question(messages)
    numbers = [int(n) for n in re.findall(r"\d+", question)][:2]
    if "multiply" in question and len(numbers) == 2:
        a, b = numbers
        if results:
            return f"{a} x {b} = {results[-1].output}."
        call = TestModel.scripted_tool_call("multiply", a=a, b=b)
        if question.startswith("Think aloud"):
            thought = f"Thinking aloud: {a} x {b} is {a} x {b // 2} doubled, so let me check."
            return ModelResponse(text=thought, tool_calls=(call,))
        return call
    caller = re.search(r"caller (\w)", question)
    return f"Noted for caller {caller.group(1)}." if caller else "Noted."


class _Hold:
    """Lets the demo keep the first caller's model call waiting until everyone has queued."""

    def __init__(self) -> None:
        self.gate: anyio.Event | None = None

    async def __call__(self, messages: Sequence[Message], **options: Any) -> Any:
        if self.gate is not None:
            await self.gate.wait()
        return _offline_reply(messages, **options)


def offline_model(hold: _Hold | None = None) -> FunctionModel:
    """The scripted, deterministic model of the offline demo."""
    return FunctionModel(hold or _Hold(), name="scripted", model="demo")


# -- the timeline ----------------------------------------------------------------------------
_COLORS = {
    "RunStart": "\033[36m",
    "RunEnd": "\033[32m",
    "RunFailed": "\033[31m",
    "control": "\033[33m",
    "section": "\033[1m",
}
_RESET = "\033[0m"


def short_id(turn_id: UUID) -> str:
    return f"{turn_id.hex[:6]}.."


def describe(message: Message) -> str:
    """One short line for a message."""
    if isinstance(message, Instruction):
        return f'instruction "{_clip(message.instruction or "")}"'
    if isinstance(message, AssistantResponse):
        return f'assistant "{_clip(message.content)}"' if message.content else "assistant (no text)"
    if isinstance(message, ActionRequest):
        arguments = ", ".join(f"{k}={v!r}" for k, v in message.arguments.items())
        return f"action_request {message.function}({_clip(arguments)})"
    if isinstance(message, ActionResponse):
        outcome = "error: " if message.is_error else ""
        return f"action_response {message.function} -> {outcome}{_clip(str(message.output))}"
    if isinstance(message, System):
        return f'system "{_clip(message.content)}"'
    return type(message).__name__


def _clip(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass
class Timeline:
    """Prints numbered events; learns which caller owns which turn from ``RunStart``."""

    out: TextIO
    color: bool = False
    step: int = 0
    turns: int = 0
    callers: dict[UUID, str] = field(default_factory=dict)

    def section(self, title: str) -> None:
        self._write(self._paint("section", f"-- {title}"))

    def line(self, text: str) -> None:
        """An unnumbered line (titles, the summary)."""
        self._write(text)

    def event(self, text: str, *, turn_id: UUID | None = None, kind: str = "") -> None:
        self.step += 1
        where = "" if turn_id is None else f"turn {short_id(turn_id)} "
        self._write(f"[{self.step:02d}] {where}{self._paint(kind, text)}")

    def caller_of(self, turn_id: UUID | None) -> str:
        name = None if turn_id is None else self.callers.get(turn_id)
        return f" (caller {name})" if name else ""

    def on_signal(self, signal: Signal, session: Any) -> None:
        if isinstance(signal, RunStart):
            self.turns += 1
            caller = _caller.get()
            if signal.turn_id is not None and caller is not None:
                self.callers[signal.turn_id] = caller
            who = self.caller_of(signal.turn_id)
            self.event(f"RunStart {signal.operation}{who}", turn_id=signal.turn_id, kind="RunStart")
        elif isinstance(signal, RunEnd):
            calls = f"{signal.num_turns} model call{'' if signal.num_turns == 1 else 's'}"
            tokens = signal.input_tokens + signal.output_tokens
            text = f"RunEnd {signal.operation}{self.caller_of(signal.turn_id)}: {calls}"
            self.event(f"{text}, {tokens} tokens", turn_id=signal.turn_id, kind="RunEnd")
        elif isinstance(signal, RunFailed):
            error = signal.data
            why = "" if error is None else f": {type(error).__name__}: {error}"
            text = f"RunFailed {signal.operation}{self.caller_of(signal.turn_id)}{why}"
            self.event(text, turn_id=signal.turn_id, kind="RunFailed")
        elif isinstance(signal, MessageAdded):
            self.event(f"MessageAdded {describe(signal.message)}", turn_id=signal.turn_id)

    def _paint(self, kind: str, text: str) -> str:
        code = _COLORS.get(kind)
        return f"{code}{text}{_RESET}" if self.color and code else text

    def _write(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()


# -- the demo --------------------------------------------------------------------------------
@dataclass(frozen=True)
class DemoConfig:
    """What to run on: the backend, and a real model (``provider`` and ``model``) or none."""

    backend: str = "asyncio"
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    color: bool = False


@dataclass(frozen=True)
class DemoSummary:
    turns: int
    messages: int
    backend: str


class _Canceller:
    """The observer of part 4: CANCEL the watched turn at its first model message."""

    def __init__(self, branch: Branch, timeline: Timeline) -> None:
        self.branch = branch
        self.timeline = timeline
        self.armed = False
        self.turn_id: UUID | None = None

    def __call__(self, signal: MessageAdded, session: Any) -> None:
        if not self.armed or isinstance(signal.message, Instruction):
            return
        self.armed = False
        self.turn_id = signal.turn_id
        accepted = self.branch.control(
            LoopDirective.CANCEL, turn_id=signal.turn_id, reason="the observer saw enough"
        )
        self.timeline.event(
            f"control CANCEL -> {accepted} (observer, on MessageAdded)",
            turn_id=signal.turn_id,
            kind="control",
        )


async def demo(config: DemoConfig, out: TextIO) -> DemoSummary:
    """Run the four parts of the demo on one Branch, printing the timeline to ``out``."""
    hold: _Hold | None = None
    model: iModel
    if config.provider is None:
        hold = _Hold()
        model = offline_model(hold)
    else:
        model = iModel(config.provider, config.model, base_url=config.base_url)
    timeline = Timeline(out, color=config.color)
    session = Session()
    session.observe(Signal, timeline.on_signal)
    branch = session.new_branch(system=SYSTEM, chat_model=model, tools=[multiply], name="demo")
    where = (
        "offline, scripted model" if hold is not None else f"{model.provider_name}/{model.model}"
    )
    timeline.line(f"lionagi demo on {config.backend} ({where})")
    try:
        await _callers_queue(branch, timeline, hold)
        await _tool_call(branch, timeline)
        await _streamed_run(branch, timeline)
        await _cancelled_run(branch, session, timeline)
    finally:
        await model.aclose()
    summary = DemoSummary(timeline.turns, len(branch.msgs), config.backend)
    timeline.line(
        f"summary: {summary.turns} turns, {summary.messages} messages, backend {summary.backend}"
    )
    return summary


async def _callers_queue(branch: Branch, timeline: Timeline, hold: _Hold | None) -> None:
    timeline.section("1. three callers share one Branch: their turns queue and never overlap")
    if hold is not None:
        hold.gate = anyio.Event()

    async def caller(name: str, arrived: anyio.Event) -> None:
        _caller.set(name)
        timeline.event(f"caller {name} calls chat_and_record")
        arrived.set()
        reply = await branch.chat_and_record(
            f"Remember {CALLERS.index(name) + 1} for caller {name}."
        )
        timeline.event(f'caller {name} got "{_clip(reply)}"')

    async with anyio.create_task_group() as group:
        for name in CALLERS:
            arrived = anyio.Event()
            group.start_soon(caller, name, arrived)
            await arrived.wait()
            await anyio.wait_all_tasks_blocked()  # let it reach its turn or the queue
        if hold is not None:
            assert hold.gate is not None
            hold.gate.set()
            hold.gate = None


async def _tool_call(branch: Branch, timeline: Timeline) -> None:
    timeline.section("2. a tool call inside a turn (operate with the multiply tool)")
    _caller.set("D")
    result = await branch.operate(instruction=TOOL_QUESTION, actions=True)
    calls = len(getattr(result, "action_responses", ()))
    answer = getattr(result, "text", None) or str(result)
    timeline.event(f'caller D got "{_clip(answer)}" ({calls} tool call{"" if calls == 1 else "s"})')


async def _streamed_run(branch: Branch, timeline: Timeline) -> None:
    timeline.section("3. a streamed run: each message is handed out once it is committed")
    _caller.set("E")
    async for message in branch.run(STREAM_QUESTION):
        timeline.event(f"caller E received {describe(message)}")


async def _cancelled_run(branch: Branch, session: Session, timeline: Timeline) -> None:
    timeline.section("4. an observer cancels a streamed run; a late directive is rejected")
    _caller.set("F")
    canceller = _Canceller(branch, timeline)
    session.observe(MessageAdded, canceller)
    canceller.armed = True
    received = 0
    async for message in branch.run(CANCEL_QUESTION):
        received += 1
        timeline.event(f"caller F received {describe(message)}")
    timeline.event(f"caller F: the stream ended cleanly after {received} messages")
    stale = branch.control(LoopDirective.CANCEL, turn_id=canceller.turn_id)
    timeline.event(
        f"control CANCEL after the turn ended -> {stale} (a stale directive is rejected)",
        turn_id=canceller.turn_id,
        kind="control",
    )


def run_demo(config: DemoConfig, out: TextIO | None = None) -> int:
    """Run :func:`demo` on ``config.backend``; returns the process exit code."""
    stream = sys.stdout if out is None else out

    async def main() -> None:
        await demo(config, stream)

    anyio.run(main, backend=config.backend)
    return 0
