"""The peers' side of ``benchmarks.peers``: runs in the peers' own environment.

Started as ``python -P benchmarks/_peer_worker.py`` (so the repository's own ``lionagi`` is not
on the path and the upstream release is imported), in a scratch working directory (the upstream
release writes logs there at exit). It reads one JSON command per line on stdin and answers
with one JSON line on stdout. Self-contained on purpose: nothing from this repository is
imported here.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
import time
import tracemalloc
import weakref
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import Any

PROMPT = "hello there"
REPLY = "ok fine"
SYSTEM = "You are a helpful assistant."
RESET = 100

now = time.perf_counter_ns


# -- the upstream lionagi release ------------------------------------------------------------
def _upstream_branch(turns: int) -> Any:
    from lionagi import Branch
    from lionagi.testing import scripted_imodel

    model = scripted_imodel([{"type": "text", "content": REPLY} for _ in range(turns)])
    return Branch(system=SYSTEM, chat_model=model)


async def _upstream_turn(branch: Any) -> None:
    await branch.communicate(PROMPT)


# -- pydantic-ai ------------------------------------------------------------------------------
class _Conversation:
    """A pydantic-ai agent on its function test model, and the history passed back each turn."""

    _agent: Any = None

    def __init__(self) -> None:
        if _Conversation._agent is None:
            from pydantic_ai import Agent
            from pydantic_ai.messages import ModelResponse, TextPart
            from pydantic_ai.models.function import FunctionModel

            def reply(messages: Any, info: Any) -> Any:
                return ModelResponse(parts=[TextPart(REPLY)])

            _Conversation._agent = Agent(FunctionModel(reply), system_prompt=SYSTEM)
        self.history: list[Any] = []

    async def turn(self) -> None:
        result = await self._agent.run(PROMPT, message_history=self.history)
        self.history = result.all_messages()


def _pydantic_ai_conversation(turns: int) -> Any:
    return _Conversation()


async def _pydantic_ai_turn(conversation: Any) -> None:
    await conversation.turn()


PEERS: dict[str, tuple[Callable[[int], Any], Callable[[Any], Awaitable[None]]]] = {
    "lionagi (upstream)": (_upstream_branch, _upstream_turn),
    "pydantic-ai": (_pydantic_ai_conversation, _pydantic_ai_turn),
}


# -- commands ---------------------------------------------------------------------------------
async def _turns(peer: str, turns: int, warm_up: int) -> dict[str, Any]:
    make, turn = PEERS[peer]
    conversation = make(warm_up)
    for _ in range(warm_up):  # untimed, in this event loop
        await turn(conversation)
    elapsed = 0
    done = 0
    while done < turns:
        size = min(RESET, turns - done)
        conversation = make(size)
        start = now()
        for _ in range(size):
            await turn(conversation)
        elapsed += now() - start
        done += size
    return {"ns": elapsed}


async def _long(peer: str, turns: int) -> dict[str, Any]:
    make, turn = PEERS[peer]
    conversation = make(turns)
    times = []
    for _ in range(turns):
        start = now()
        await turn(conversation)
        times.append(now() - start)
    return {"times": times}


async def _memory(peer: str, count: int) -> dict[str, Any]:
    make, turn = PEERS[peer]
    for _ in range(5):  # warm-up: imports, caches
        await turn(make(1))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = []
        for _ in range(count):
            conversation = make(1)
            await turn(conversation)
            kept.append(conversation)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    conversation = make(1)
    await turn(conversation)
    probe = conversation if peer != "pydantic-ai" else conversation.history[-1]
    ref = weakref.ref(probe)
    del conversation, probe
    by_refcount = ref() is None
    gc.collect()
    return {
        "bytes": (after - before) / count,
        "by_refcount": by_refcount,
        "after_gc": ref() is None,
    }


def _versions() -> dict[str, Any]:
    import lionagi

    out: dict[str, Any] = {"python": sys.version.split()[0], "lionagi_path": lionagi.__file__}
    for name in ("lionagi", "pydantic-ai-slim", "pydantic", "pydantic-core", "anyio"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


COMMANDS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    "turns": _turns,
    "long": _long,
    "memory": _memory,
}


def main() -> None:
    logging.disable(logging.CRITICAL)  # the upstream release logs every call at INFO
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        try:
            if op == "quit":
                break
            answer = _versions() if op == "versions" else asyncio.run(COMMANDS[op](**request))
        except Exception as exc:  # reported to the orchestrator, which records it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
