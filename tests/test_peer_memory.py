"""The peers' memory figure is the bytes their conversations keep, whatever else the worker
process holds (the worker answers for every peer in one process, after other commands)."""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any

from benchmarks import _peer_worker

COUNT = 500


class _Conversation:
    def __init__(self) -> None:
        self.data: bytearray | None = None


async def _turn(conversation: Any) -> None:
    conversation.data = bytearray(1000)


def _one_conversation_bytes() -> int:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = _Conversation()
        kept.data = bytearray(1000)
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_the_peer_memory_figure_does_not_depend_on_what_else_the_process_keeps(
    monkeypatch: Any,
) -> None:
    monkeypatch.setitem(_peer_worker.PEERS, "fixed size", (_Conversation, _turn))
    alone = asyncio.run(_peer_worker._memory("fixed size", COUNT))
    others: list[list[object]] = [
        [] for _ in range(100_000)
    ]  # what other peers' runs left alive: tracked objects
    beside_others = asyncio.run(_peer_worker._memory("fixed size", COUNT))
    del others
    one = _one_conversation_bytes()
    for figure in (alone, beside_others):
        assert one - 16 <= figure["bytes"] <= one + 64, (figure, one)  # + the list slot holding it
    assert abs(alone["bytes"] - beside_others["bytes"]) < 8, (alone, beside_others)
    assert round(alone["gc_tracked"]) == round(beside_others["gc_tracked"]) == 1
