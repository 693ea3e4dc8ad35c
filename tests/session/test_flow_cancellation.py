"""Cancel a 50-node flow at seeded random points; check the invariants each time.

The flow's caller is cancelled from an observer handler when the k-th signal of the run is
delivered, for k drawn at random over the whole run. Invariants: every started turn has
exactly one terminal; nothing starts (node or turn) after the cancellation; every started
node has exactly one NodeEnd/NodeFailed; flow signals come once; no task outlives the flow;
every branch is idle afterwards.
"""

from __future__ import annotations

import random
from typing import Any

import anyio
import pytest

from lionagi import (
    Branch,
    Builder,
    FlowEnd,
    FlowStart,
    NodeEnd,
    NodeFailed,
    NodeSkipped,
    NodeStart,
    RunStart,
    Session,
    Signal,
)
from lionagi.operations.graph import OperationGraph
from lionagi.testing import FunctionModel
from tests.helpers import Recorder, assert_idle, assert_one_terminal_per_start

NODES = 50


async def _reply(messages: Any, **options: Any) -> str:
    await anyio.lowlevel.checkpoint()
    return "ok"


def random_graph(rng: random.Random) -> OperationGraph:
    builder = Builder()
    ids: list[Any] = []
    for i in range(NODES):
        deps = rng.sample(ids, k=min(len(ids), rng.randint(0, 3)))
        checkpoints = rng.randint(0, 4)

        async def work(branch: Branch, n: int = checkpoints, label: int = i) -> int:
            for _ in range(n):
                await anyio.lowlevel.checkpoint()
            if label % 2:
                await branch.chat("hi")  # a model call joins the node's turn
            return label

        kind = rng.random()
        if kind < 0.1 and ids:
            ids.append(
                builder.add_operation(
                    "chat", depends_on=deps or [ids[-1]], inherit_context=True, instruction="x"
                )
            )
        elif kind < 0.2:
            ids.append(builder.add_operation("chat_and_record", depends_on=deps, instruction="y"))
        else:
            ids.append(builder.add_operation(work, depends_on=deps))
    return builder.get_graph()


class Run(Recorder):
    def __init__(self, cancel_at: int | None) -> None:
        super().__init__()
        self.cancel_at = cancel_at
        self.count = 0
        self.cancelled = False
        self.started_after_cancel: list[Signal] = []
        self.scope = anyio.CancelScope()

    def __call__(self, signal: Signal, session: Any) -> None:
        self.signals.append(signal)
        if self.cancelled and isinstance(signal, NodeStart | RunStart):
            self.started_after_cancel.append(signal)
        self.count += 1
        if self.count == self.cancel_at:
            self.cancelled = True
            self.scope.cancel()


async def run_once(graph: OperationGraph, cancel_at: int | None, max_concurrent: int | None) -> Run:
    session = Session()
    run = Run(cancel_at)
    session.observe(Signal, run)
    session.new_branch(system="s", chat_model=FunctionModel(_reply))
    before = len(anyio.get_running_tasks())
    with run.scope:
        await session.flow(graph, max_concurrent=max_concurrent)
    assert len(anyio.get_running_tasks()) == before, "a task outlived the flow"
    for branch in session:
        assert_idle(branch)
    return run


def check_invariants(run: Run) -> None:
    assert run.started_after_cancel == []
    assert_one_terminal_per_start(run)
    assert len([s for s in run.signals if isinstance(s, FlowStart)]) == 1
    ends = [s for s in run.signals if isinstance(s, FlowEnd)]
    assert len(ends) == 1
    assert run.signals[-1] is ends[0]
    started = [s.op_id for s in run.signals if isinstance(s, NodeStart)]
    assert len(started) == len(set(started))
    finished = [s.op_id for s in run.signals if isinstance(s, NodeEnd | NodeFailed)]
    assert sorted(finished) == sorted(started)
    skipped = {s.op_id for s in run.signals if isinstance(s, NodeSkipped)}
    assert not skipped & set(started)
    turns = {s.op_id for s in run.signals if isinstance(s, RunStart)}
    assert turns <= set(started)
    if run.cancelled and ends[0].status != "completed":  # (late cancels find no checkpoint)
        assert ends[0].status == "cancelled"
        cancelled = [
            s
            for s in run.signals
            if isinstance(s, NodeFailed) and isinstance(s.data, anyio.get_cancelled_exc_class())
        ]
        assert ends[0].cancelled == len(cancelled)
    else:
        assert ends[0].status == "completed"
        assert ends[0].completed == NODES


@pytest.mark.parametrize("seed", range(8))
async def test_cancel_a_50_node_flow_at_random_points(seed: int) -> None:
    rng = random.Random(seed)
    graph = random_graph(rng)
    max_concurrent = rng.choice([1, 3, 8, None])
    full = await run_once(graph, None, max_concurrent)
    check_invariants(full)
    for _ in range(4):
        cancel_at = rng.randint(1, full.count)
        run = await run_once(graph, cancel_at, max_concurrent)
        assert run.cancelled
        check_invariants(run)
