"""Turn overhead: sequential ``chat_and_record`` turns against two floors.

- The *library model call*: the same offline model's ``invoke`` called directly, with the
  instruction and the reply built and appended to a list by hand. It pays what any call of this
  library pays (request object, timeout scope, pydantic response, usage and message objects).
- The *physical floor*: two dicts appended to a list and one await of an async reply function
  per turn; nothing a library could do costs less.

Each variant runs in batches, alternating with the floors in one process, and every ratio is
taken pair by pair (same repeat) before the median. Histories restart every ``RESET`` turns so
this measures the driver, not the history length (see ``long``). trio against asyncio is
measured side by side in subprocess pairs by the ``backends`` scenario, not here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks._common import (
    PROMPT,
    SYSTEM,
    Config,
    backends,
    floor_turns,
    median,
    new_history,
    new_plain_history,
    now,
    offline_model,
    physical_floor_turns,
    settle,
    target,
    us,
)
from lionagi import Branch, MessageAdded, RunEnd, RunStart, Session
from lionagi.protocols.messages import Instruction
from lionagi.testing import FunctionModel

RESET = 100

Setup = Callable[[FunctionModel, dict[str, int]], Any]
Turns = Callable[[Any, int], Awaitable[None]]


async def _floor(history: Any, turns: int) -> None:
    await floor_turns(history[0], turns, history[1])


async def _physical(history: Any, turns: int) -> None:
    await physical_floor_turns(turns, history)


async def _recorded(branch: Branch, turns: int) -> None:
    for _ in range(turns):
        await branch.chat_and_record(PROMPT)


async def _unrecorded(branch: Branch, turns: int) -> None:
    for _ in range(turns):
        await branch.chat(PROMPT)


def observed_branch(model: FunctionModel, counts: dict[str, int]) -> Branch:
    """A Branch in a Session whose observer counts RunStart, MessageAdded and RunEnd."""
    session = Session()

    def count(signal: Any, _session: Any) -> None:
        counts[signal.kind] = counts.get(signal.kind, 0) + 1

    for kind in (RunStart, MessageAdded, RunEnd):
        session.observe(kind, count)
    return session.new_branch(system=SYSTEM, chat_model=model)


async def clock(branch: Any, instruction: Instruction) -> str:
    """A context provider with a short block, the kind a memory or clock provider returns."""
    return "Current time: 12:00 UTC. The user prefers short answers."


def _plain(model: FunctionModel, counts: dict[str, int]) -> Branch:
    return Branch(system=SYSTEM, chat_model=model)


def _with_provider(model: FunctionModel, counts: dict[str, int]) -> Branch:
    branch = Branch(system=SYSTEM, chat_model=model)
    branch.providers.register(clock, name="clock")
    return branch


PHYSICAL = "physical floor"
MODEL_CALL = "library model call"

VARIANTS: dict[str, tuple[Setup, Turns]] = {
    PHYSICAL: (lambda model, counts: new_plain_history(), _physical),
    MODEL_CALL: (lambda model, counts: (model, new_history()), _floor),
    "chat_and_record": (_plain, _recorded),
    "chat_and_record + observer": (observed_branch, _recorded),
    "chat_and_record + context provider": (_with_provider, _recorded),
    "chat (not recorded)": (_plain, _unrecorded),
}


async def _batch(
    variant: tuple[Setup, Turns], model: FunctionModel, turns: int, counts: dict[str, int]
) -> int:
    """Nanoseconds for ``turns`` turns, in fresh conversations of ``RESET`` turns (the setup of
    each conversation is not timed)."""
    setup, run_turns = variant
    elapsed = 0
    done = 0
    while done < turns:
        size = min(RESET, turns - done)
        state = setup(model, counts)
        start = now()
        await run_turns(state, size)
        elapsed += now() - start
        done += size
    return elapsed


async def _measure(turns: int, repeats: int) -> dict[str, Any]:
    model = offline_model()
    names = list(VARIANTS)
    times: dict[str, list[float]] = {name: [] for name in names}
    counts: dict[str, int] = {}
    for name in names:  # warm-up
        await _batch(VARIANTS[name], model, min(turns, RESET), counts)
    counts.clear()
    for repeat in range(repeats):
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        for name in order:
            settle()
            times[name].append(await _batch(VARIANTS[name], model, turns, counts) / turns)
    return {"times": times, "signals": dict(counts)}


def run(config: Config) -> dict[str, Any]:
    turns = config.size(2000, 20)
    repeats = config.size(9, 2)
    rows: list[dict[str, Any]] = []
    per_backend: dict[str, dict[str, float]] = {}
    signals: dict[str, Any] = {}
    for backend in backends():
        measured = backend.run(_measure, turns, repeats)
        times = measured["times"]
        call = times[MODEL_CALL]
        physical = times[PHYSICAL]
        per_backend[backend.name] = {}
        for name, samples in times.items():
            ratio = median([t / f for t, f in zip(samples, call, strict=True)])
            to_physical = median([t / f for t, f in zip(samples, physical, strict=True)])
            per_backend[backend.name][name] = ratio
            rows.append(
                {
                    "backend": backend.name,
                    "variant": name,
                    "us_per_turn": us(median(samples)),
                    "ratio_to_model_call": round(ratio, 2),
                    "ratio_to_physical": round(to_physical, 1),
                    "min_us": us(min(samples)),
                    "max_us": us(max(samples)),
                }
            )
        signals[backend.name] = measured["signals"]
    return {
        "title": "Turn overhead",
        "description": (
            f"{turns} sequential turns per batch ({RESET} per conversation), {repeats} batches "
            "per variant alternating with both floors; median microseconds per turn and the "
            "median of per-batch ratios. Library model call: the same FunctionModel's invoke "
            "plus building and appending the instruction and reply (pydantic messages) by hand. "
            "Physical floor: two dicts appended to a list and one await of an async reply "
            "function. The model is an async function answering at once with constant usage."
        ),
        "columns": [
            "backend",
            "variant",
            "us_per_turn",
            "ratio_to_model_call",
            "ratio_to_physical",
            "min_us",
            "max_us",
        ],
        "rows": rows,
        "targets": _targets(per_backend),
        "signals_delivered": signals,
    }


TURN_NOTE = (
    "The library model call is one request through iModel (the model's timeout scope) plus two "
    "pydantic messages. A chat_and_record turn adds the FIFO lock, the turn context and its id, "
    "and the operation's parameters; it opens no task group (chat, chat_and_record and "
    "communicate start no nested work) and no shielded cancel scope."
)
OBSERVER_NOTE = (
    "With an observer a turn also builds RunStart, two MessageAdded and RunEnd (slotted "
    "dataclasses, built without validation) and calls the handlers; it opens no task group "
    "either (the operation starts no nested work, observed or not), message signals are "
    "delivered from the turn's own task at the end of the step (no task per message) and no "
    "shielded cancel scope or coroutine is added for synchronous handlers."
)


def _targets(per_backend: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for name, ratios in per_backend.items():
        out.append(
            target(
                f"unobserved recorded turn <= 1.8x library model call ({name})",
                ratios["chat_and_record"],
                1.8,
                note=TURN_NOTE,
            )
        )
        out.append(
            target(
                f"observed recorded turn <= 3x library model call ({name})",
                ratios["chat_and_record + observer"],
                3.0,
                note=OBSERVER_NOTE,
            )
        )
    return out


def main(argv: list[str]) -> int:
    """``python -m benchmarks.turn BACKEND [TURNS [BATCHES]]``: one JSON line, each variant's
    median per-batch ratio to the library model call (for comparing builds of the package run
    one after the other, e.g. a prototype against its base)."""
    import json
    import sys

    import anyio

    if not 1 <= len(argv) <= 3:
        print(main.__doc__, file=sys.stderr)
        return 2
    turns = int(argv[1]) if len(argv) > 1 else 1000
    batches = int(argv[2]) if len(argv) > 2 else 3
    times = anyio.run(_measure, turns, batches, backend=argv[0])["times"]
    call = times[MODEL_CALL]
    ratios = {
        k: round(median([a / b for a, b in zip(v, call, strict=True)]), 3) for k, v in times.items()
    }
    print(json.dumps({"backend": argv[0], **ratios, "model_call_us": us(median(call))}))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
