"""Memory: what a conversation keeps, and whether a dropped Branch is freed.

- Retained per 1,000 one-turn conversations (a Branch with a system message and one recorded
  turn, all kept alive), against the size of the same three messages built on their own.
- Retained per recorded turn of one long conversation, against the size of the two messages.
- Where a one-turn conversation's bytes go: every object it keeps (reachable from its Branch
  and not from another conversation), by part -- the Branch, its history, each message, the
  reply's usage, the log record, the turn lock -- with how many are tracked by the cyclic
  garbage collector. A message keeps its id as the UUID's number (``id`` makes the UUID).
- A dropped Branch: freed by reference counting alone, and after ``gc.collect()``, after a
  normal turn, after a cancelled turn, and in a Session after ``remove_branch``.

Sizes come from tracemalloc (the breakdown from ``sys.getsizeof``, which does not see the
allocator's rounding); every model shares one offline model without a request log. Each
measurement lets the event loop run one iteration before it is read: asyncio keeps a cancelled
timer (each model call's timeout scope makes one) in its queue, with the context it was
scheduled in, until the loop next runs -- memory of the loop, not of the conversation.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
import types
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from benchmarks._common import (
    PROMPT,
    REPLY,
    SYSTEM,
    Config,
    backends,
    offline_model,
    settle,
    target,
)
from lionagi import Branch, RunEnd, Session
from lionagi.protocols.messages import AssistantResponse, Instruction, Message, System, Usage
from lionagi.testing import FunctionModel

MIB = 1024 * 1024


async def _traced(build: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
    """Bytes retained by what ``build()`` returns (tracemalloc, after a collection), measured
    inside the running event loop so the loop's own allocations stay out."""
    settle()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = await build()
        await anyio.sleep(0)  # one loop iteration: asyncio drops the cancelled timers
        settle()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, kept


def _messages(turns: int, system: bool) -> list[Message]:
    out: list[Message] = [System(content=SYSTEM)] if system else []
    for _ in range(turns):
        out.append(Instruction(instruction=PROMPT))
        usage = Usage(input_tokens=5, output_tokens=2)
        out.append(AssistantResponse(content=REPLY, model="function", usage=usage))
    return out


async def _conversations(model: FunctionModel, count: int) -> list[Branch]:
    branches = []
    for _ in range(count):
        branch = Branch(system=SYSTEM, chat_model=model)
        await branch.chat_and_record(PROMPT)
        branches.append(branch)
    return branches


async def _long(model: FunctionModel, branch: Branch, turns: int) -> Branch:
    for _ in range(turns):
        await branch.chat_and_record(PROMPT)
    return branch


async def _retained(count: int, turns: int) -> dict[str, float]:
    model = offline_model()
    await _conversations(model, 10)  # warm-up: imports, caches

    async def messages(turns: int, system: bool, times: int) -> list[list[Message]]:
        return [_messages(turns, system) for _ in range(times)]

    conversations, _ = await _traced(lambda: _conversations(model, count))
    own_three, _ = await _traced(lambda: messages(1, True, count))
    branch = Branch(system=SYSTEM, chat_model=model)
    await _long(model, branch, 10)
    grown, _ = await _traced(lambda: _long(model, branch, turns))
    own_two, _ = await _traced(lambda: messages(turns, False, 1))
    return {
        "conversation_bytes": conversations / count,
        "conversation_messages_bytes": own_three / count,
        "turn_bytes": grown / turns,
        "turn_messages_bytes": own_two / turns,
    }


# -- where the bytes go ------------------------------------------------------------------------
_SHARED_KINDS = (type, types.ModuleType, types.CodeType)


def kept_objects(root: object, *others: object) -> dict[int, object]:
    """Every object reachable from ``root`` (by ``gc.get_referents``) and from none of
    ``others``: what ``root`` alone keeps alive. Classes, modules and code are never counted."""
    shared: set[int] = set()
    for other in others:
        shared |= set(_reachable(other, set()))
    return _reachable(root, shared)


def _reachable(root: object, stop: set[int]) -> dict[int, object]:
    found: dict[int, object] = {}
    stack = [root]
    while stack:
        obj = stack.pop()
        key = id(obj)
        if key in found or key in stop or isinstance(obj, _SHARED_KINDS):
            continue
        found[key] = obj
        stack.extend(gc.get_referents(obj))
    return found


def _parts(branch: Branch) -> dict[str, list[object]]:
    """The roots of a one-turn conversation's parts, in the order they are counted (an object
    reachable from two parts counts in the first)."""
    system, instruction, reply = branch.msgs
    assert isinstance(reply, AssistantResponse)
    return {
        "system message": [system],
        "instruction": [instruction],
        "the reply's usage": [reply.usage],
        "reply (besides its usage)": [reply],
        "history (list, id index, callbacks)": [branch._messages],
        # before the logs, whose record refers to it: the Branch's own, not the record's
        "the Branch's id": [branch.id],
        "logs (manager and the model call's record)": [branch._logs],
        "turn lock": [branch._turn_lock],
        "Branch itself (attributes, tool registry)": [branch],
    }


async def _breakdown(model: FunctionModel) -> list[dict[str, Any]]:
    branches = await _conversations(model, 3)
    await anyio.sleep(0)
    settle()
    mine = kept_objects(branches[0], *branches[1:])
    counted: set[int] = set()
    rows = []
    for part, roots in _parts(branches[0]).items():
        found = _part(roots, mine, counted)
        rows.append(
            {
                "part": part,
                "bytes": sum(sys.getsizeof(obj) for obj in found),
                "objects": len(found),
                "gc_tracked": sum(gc.is_tracked(obj) for obj in found),
                "types": ", ".join(sorted({type(obj).__name__ for obj in found})),
            }
        )
    rest = sorted({type(obj).__name__ for key, obj in mine.items() if key not in counted})
    assert not rest, f"objects kept outside every part: {rest}"
    rows.append(
        {
            "part": "one-turn conversation",
            "bytes": sum(sys.getsizeof(obj) for obj in mine.values()),
            "objects": len(mine),
            "gc_tracked": sum(gc.is_tracked(obj) for obj in mine.values()),
            "types": "",
        }
    )
    return rows


def _part(roots: list[object], mine: dict[int, object], counted: set[int]) -> list[object]:
    """The objects of ``mine`` reachable from ``roots`` through objects of ``mine`` only, not
    counted yet (and now counted)."""
    found = []
    stack = list(roots)
    while stack:
        obj = stack.pop()
        key = id(obj)
        if key in counted or key not in mine:
            continue
        counted.add(key)
        found.append(obj)
        stack.extend(gc.get_referents(obj))
    return found


# -- freed? ----------------------------------------------------------------------------------
async def _after_turn(model: FunctionModel) -> tuple[weakref.ref[Branch], None]:
    branch = Branch(system=SYSTEM, chat_model=model)
    await branch.chat_and_record(PROMPT)
    return weakref.ref(branch), None


async def _after_cancel_in_task(model: FunctionModel) -> tuple[weakref.ref[Branch], None]:
    with anyio.CancelScope() as scope:

        async def block(messages: Any, **options: Any) -> str:
            scope.cancel()
            await anyio.sleep_forever()
            return REPLY

        branch = Branch(system=SYSTEM, chat_model=FunctionModel(block))
        await branch.chat_and_record(PROMPT)
    return weakref.ref(branch), None


async def _after_cancel(model: FunctionModel) -> tuple[weakref.ref[Branch], None]:
    entered = anyio.Event()

    async def block(messages: Any, **options: Any) -> str:
        entered.set()
        await anyio.sleep_forever()
        return REPLY

    branch = Branch(system=SYSTEM, chat_model=FunctionModel(block))
    async with anyio.create_task_group() as group:
        group.start_soon(branch.chat_and_record, PROMPT)
        await entered.wait()
        group.cancel_scope.cancel()
    return weakref.ref(branch), None


async def _in_session(model: FunctionModel) -> tuple[weakref.ref[Branch], Session]:
    session = Session()
    session.observe(RunEnd, lambda signal, session: None)
    branch = session.new_branch(system=SYSTEM, chat_model=model)
    await branch.chat_and_record(PROMPT)
    session.remove_branch(branch)
    return weakref.ref(branch), session


CASES = {
    "after a recorded turn": _after_turn,
    "after a turn cancelled mid-model-call by the caller's cancel scope": _after_cancel_in_task,
    "after a turn cancelled mid-model-call in a task group": _after_cancel,
    "removed from its Session (Session kept)": _in_session,
}


def _freed(backend: Any) -> dict[str, dict[str, bool]]:
    model = offline_model()
    out = {}
    for name, case in CASES.items():
        ref, keep = backend.run(case, model)
        by_refcount = ref() is None
        gc.collect()
        out[name] = {"by_refcount": by_refcount, "after_gc": ref() is None}
        del keep
    return out


def run(config: Config) -> dict[str, Any]:
    count = config.size(1000, 50)
    turns = config.size(1000, 50)
    rows = []
    targets = []
    all_freed = True
    by_refcount = True
    parts = backends()[0].run(_breakdown, offline_model())
    for backend in backends():
        sizes = backend.run(_retained, count, turns)
        freed = _freed(backend)
        per_turn_ratio = sizes["turn_bytes"] / sizes["turn_messages_bytes"]
        rows.append(
            {
                "backend": backend.name,
                "MiB_per_1000_conversations": round(sizes["conversation_bytes"] * 1000 / MIB, 3),
                "their_messages_MiB": round(sizes["conversation_messages_bytes"] * 1000 / MIB, 3),
                "bytes_per_recorded_turn": round(sizes["turn_bytes"]),
                "two_messages_bytes": round(sizes["turn_messages_bytes"]),
                "turn_over_messages": round(per_turn_ratio, 2),
                "dropped_branch_freed": ", ".join(
                    f"{name}: {'refcount' if f['by_refcount'] else 'gc' if f['after_gc'] else 'NO'}"
                    for name, f in freed.items()
                ),
            }
        )
        targets.append(
            target(
                f"memory per recorded turn <= 2x its messages' own size ({backend.name})",
                per_turn_ratio,
                2.0,
                note=(
                    "Beyond the two messages (slotted, each id kept as the UUID's number: about "
                    "0.45 KiB together): the logs' record of the model call (its slots in the "
                    "logs' one flat list: the call's figures with the turn id, and the reply "
                    "itself, a slotted object), and the history's list slot and id index "
                    "entry. The messages shrank more than the record, so this ratio rose while "
                    "the bytes fell."
                ),
            )
        )
        all_freed = all_freed and all(f["after_gc"] for f in freed.values())
        by_refcount = by_refcount and all(f["by_refcount"] for f in freed.values())
    targets.append(
        {
            "target": "a dropped Branch is garbage-collected (every case, every backend)",
            "value": all_freed,
            "limit": True,
            "unit": "",
            "met": all_freed,
            "by": None,
            "note": (
                "Freed by reference counting as soon as the last reference goes (the history "
                "holds its Branch weakly)."
                if by_refcount
                else "Some cases were freed only by the cyclic collector: see the table. On "
                "asyncio, a task that anyio's task group cancelled stays in a reference cycle "
                "inside anyio (its task-done callback keeps the task's final CancelledError, "
                "whose traceback holds the task's frames) whatever the task ran; with a cancel "
                "scope in the caller's own task the Branch is freed by reference counting."
            ),
        }
    )
    return {
        "title": "Memory",
        "description": (
            f"tracemalloc. {count} one-turn conversations kept alive (Branch with a system "
            "message and one recorded turn) against the same three messages built alone; "
            f"{turns} more recorded turns on one Branch against the same two messages per turn "
            "built alone. 'refcount': freed as soon as the last reference went; 'gc': freed by "
            "the cyclic collector."
        ),
        "columns": [
            "backend",
            "MiB_per_1000_conversations",
            "their_messages_MiB",
            "bytes_per_recorded_turn",
            "two_messages_bytes",
            "turn_over_messages",
            "dropped_branch_freed",
        ],
        "rows": rows,
        "tables": {
            "Where a one-turn conversation's bytes go (asyncio, sys.getsizeof)": {
                "columns": ["part", "bytes", "objects", "gc_tracked", "types"],
                "rows": parts,
            }
        },
        "targets": targets,
    }
