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
INPUT_TOKENS = 9  # the same constant usage every side reports (benchmarks._common)
OUTPUT_TOKENS = 2

now = time.perf_counter_ns


# -- the upstream lionagi release ------------------------------------------------------------
class _Upstream:
    """Branches of the upstream release sharing one model whose call is an async function.

    The release's offline model (``lionagi.testing.scripted_imodel``) matches a script and
    records every call; here its endpoint's call is replaced by an async function answering at
    once with constant usage, the same call shape every side of the comparison gets.
    """

    _model: Any = None

    @classmethod
    def model(cls) -> Any:
        if cls._model is None:
            from lionagi.testing import scripted_imodel

            model = scripted_imodel([{"type": "text", "content": REPLY}])

            async def call(payload: dict[str, Any], headers: dict[str, Any], **kw: Any) -> Any:
                return {
                    "id": "chatcmpl-offline",
                    "object": "chat.completion",
                    "created": 0,
                    "model": payload.get("model") or "scripted",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": REPLY},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": INPUT_TOKENS,
                        "completion_tokens": OUTPUT_TOKENS,
                        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
                    },
                }

            model.endpoint._call = call
            cls._model = model
        return cls._model


def _upstream_conversation() -> Any:
    from lionagi import Branch

    return Branch(system=SYSTEM, chat_model=_Upstream.model())


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
            from pydantic_ai.usage import RequestUsage

            async def reply(messages: Any, info: Any) -> Any:
                usage = RequestUsage(input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS)
                return ModelResponse(parts=[TextPart(REPLY)], usage=usage)

            _Conversation._agent = Agent(FunctionModel(reply), system_prompt=SYSTEM)
        self.history: list[Any] = []

    async def turn(self) -> None:
        result = await self._agent.run(PROMPT, message_history=self.history)
        self.history = result.all_messages()


async def _pydantic_ai_turn(conversation: Any) -> None:
    await conversation.turn()


PEERS: dict[str, tuple[Callable[[], Any], Callable[[Any], Awaitable[None]]]] = {
    "lionagi (upstream)": (_upstream_conversation, _upstream_turn),
    "pydantic-ai": (_Conversation, _pydantic_ai_turn),
}


# -- commands ---------------------------------------------------------------------------------
async def _conversations(peer: str, turns: int, length: int) -> None:
    make, turn = PEERS[peer]
    for _ in range(max(1, turns // length)):
        conversation = make()
        for _ in range(length):
            await turn(conversation)


async def _turns(peer: str, turns: int, length: int, warm_up: int) -> dict[str, Any]:
    """Nanoseconds for ``turns`` turns in conversations of ``length`` turns, each conversation
    created inside the timed span (for one-turn conversations that is part of the cost)."""
    await _conversations(peer, warm_up, 1)  # untimed, in this event loop
    start = now()
    await _conversations(peer, turns, length)
    return {"ns": now() - start}


async def _long(peer: str, turns: int) -> dict[str, Any]:
    make, turn = PEERS[peer]
    conversation = make()
    times = []
    for _ in range(turns):
        start = now()
        await turn(conversation)
        times.append(now() - start)
    return {"times": times}


async def _memory(peer: str, count: int) -> dict[str, Any]:
    """Bytes a one-turn conversation keeps; every conversation shares the peer's one model."""
    make, turn = PEERS[peer]
    for _ in range(5):  # warm-up: imports, caches, the shared model
        await turn(make())
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = []
        for _ in range(count):
            conversation = make()
            await turn(conversation)
            kept.append(conversation)
        await asyncio.sleep(0)  # one loop iteration, as on our side (cancelled timers go)
        gc.collect()
        size = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del kept
    gc.collect()
    objects_before = len(gc.get_objects())
    kept = [make() for _ in range(count)]
    for conversation in kept:
        await turn(conversation)
    await asyncio.sleep(0)
    gc.collect()
    tracked = len(gc.get_objects()) - objects_before - 1  # less the list holding them
    del kept
    conversation = make()
    await turn(conversation)
    probe = conversation if peer != "pydantic-ai" else conversation.history[-1]
    ref = weakref.ref(probe)
    del conversation, probe
    by_refcount = ref() is None
    gc.collect()
    return {
        "bytes": size / count,
        "gc_tracked": tracked / count,
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
