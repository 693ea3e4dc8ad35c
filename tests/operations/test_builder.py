"""Builder: parameters checked at build time, graph shapes, cycles, Mermaid."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from pydantic import BaseModel

import lionagi
from lionagi import Branch, Builder, OperationGraphBuilder
from lionagi.errors import FlowError, GraphCycleError, OperationError


def test_builder_is_public_under_both_names() -> None:
    assert lionagi.Builder is lionagi.OperationGraphBuilder is Builder is OperationGraphBuilder


def test_parameters_are_checked_when_the_node_is_added() -> None:
    builder = Builder()
    with pytest.raises(OperationError, match=r"node 'p'.*parse\(\).*'respons_format'"):
        builder.add_operation("parse", node_id="p", text="{}", respons_format=BaseModel)
    with pytest.raises(OperationError, match="missing a required argument: 'text'"):
        builder.add_operation("parse", response_format=BaseModel)
    with pytest.raises(OperationError, match="unknown operation 'comunicate'"):
        builder.add_operation("comunicate", instruction="x")

    async def step(branch: Branch, *, topic: str) -> str:
        return topic

    with pytest.raises(OperationError, match="step"):
        builder.add_operation(step, topic="a", colour="red")
    with pytest.raises(OperationError, match="'branch' is the node's branch"):
        builder.add_operation(step, parameters={"branch": 1, "topic": "a"})
    with pytest.raises(OperationError, match="callable"):
        builder.add_operation(42)  # type: ignore[arg-type]
    assert len(builder.graph) == 0  # nothing half-added
    builder.add_operation(step, topic="fine")
    assert len(builder.graph) == 1


def test_names_are_unique_and_resolve_like_ids() -> None:
    builder = Builder()
    a = builder.add_operation("chat", node_id="a", instruction="x")
    b = builder.add_operation("chat", depends_on="a")
    with pytest.raises(FlowError, match="already used"):
        builder.add_operation("chat", node_id="a")
    with pytest.raises(FlowError, match="no node 'zz'"):
        builder.add_operation("chat", depends_on=["zz"])
    graph = builder.get_graph()
    assert graph.resolve("a") == a == graph.resolve(str(a))
    assert graph.predecessors(b) == [a]
    assert builder.get_node_by_reference("a") is graph.nodes[a]
    assert builder.get_node_by_reference("nope") is None
    # a node, its id (or the id as text) or its name is in the graph; anything else is not
    assert all(ref in graph for ref in ("a", a, str(a), graph.nodes[a]))
    assert not any(ref in graph for ref in ("nope", 3, None))


def test_inherit_context_needs_a_dependency_and_excludes_branch() -> None:
    builder = Builder()
    with pytest.raises(FlowError, match="inherit_context=True needs a dependency"):
        builder.add_operation("chat", inherit_context=True)
    root = builder.add_operation("chat")
    with pytest.raises(FlowError, match="not both"):
        builder.add_operation("chat", depends_on=[root], inherit_context=True, branch="x")
    child = builder.add_operation("chat", depends_on=[root], inherit_context=True)
    assert builder.graph.nodes[child].primary_dependency == root


def test_cycles_are_rejected_naming_the_cycle() -> None:
    builder = Builder()
    a = builder.add_operation("chat", node_id="a")
    b = builder.add_operation("chat", node_id="b", depends_on=[a])
    c = builder.add_operation("chat", node_id="c", depends_on=[b])
    builder.add_edge(c, a)
    with pytest.raises(GraphCycleError) as caught:
        builder.get_graph()
    assert caught.value.cycle == ["a", "b", "c"]
    assert "a -> b -> c -> a" in str(caught.value)
    with pytest.raises(GraphCycleError, match="a -> a"):
        builder.add_edge(a, a)


async def test_a_cyclic_graph_never_starts_a_flow() -> None:
    from lionagi import Session

    builder = Builder()
    a = builder.add_operation("chat", node_id="a")
    b = builder.add_operation("chat", node_id="b", depends_on=[a])
    builder.graph.add_edge(b, a)  # bypasses get_graph()
    with pytest.raises(GraphCycleError, match="a -> b -> a"):
        await Session().flow(builder.graph)


def test_aggregation_defaults_to_the_current_leaves() -> None:
    builder = Builder()
    a = builder.add_operation("chat")
    b = builder.add_operation("chat")
    c = builder.add_operation("chat", depends_on=[a])
    agg = builder.add_aggregation("communicate", instruction="sum up")
    assert set(builder.graph.predecessors(agg)) == {b, c}
    assert builder.graph.nodes[agg].aggregation
    with pytest.raises(FlowError, match="out of range"):
        builder.add_aggregation("chat", source_node_ids=[a], inherit_from_source=2)
    inherit = builder.add_aggregation(
        "chat", source_node_ids=[a, b], inherit_context=True, inherit_from_source=1
    )
    assert builder.graph.nodes[inherit].primary_dependency == b


class Idea(BaseModel):
    instruction: str


def test_expand_from_result_strategies() -> None:
    builder = Builder()
    src = builder.add_operation("chat", node_id="src")
    kids = builder.expand_from_result([Idea(instruction="i1"), "raw"], src, "communicate")
    assert [builder.graph.predecessors(k) for k in kids] == [[src], [src]]
    assert builder.graph.nodes[kids[0]].parameters == {"instruction": "i1"}
    assert builder.graph.nodes[kids[1]].parameters == {"context": {"item": "raw", "item_index": 1}}

    chain = builder.expand_from_result(["a", "b", "c"], src, "chat", strategy="sequential")
    assert builder.graph.predecessors(chain[1]) == [chain[0]]
    assert builder.graph.predecessors(chain[0]) == [src]

    staged = builder.expand_from_result(
        list("abcd"), src, "chat", strategy="sequential_concurrent_chunk", chunk_size=2
    )
    assert set(builder.graph.predecessors(staged[2])) == {staged[0], staged[1]}
    chains = builder.expand_from_result(
        list("abcd"), src, "chat", strategy="concurrent_sequential_chunk", chunk_size=2
    )
    assert builder.graph.predecessors(chains[1]) == [chains[0]]
    assert builder.graph.predecessors(chains[2]) == [src]
    with pytest.raises(FlowError, match="chunk_size"):
        builder.expand_from_result(["a"], src, "chat", strategy="sequential_concurrent_chunk")
    with pytest.raises(FlowError, match="unknown expansion strategy"):
        builder.expand_from_result(["a"], src, "chat", strategy="sideways")


@pytest.mark.parametrize(
    ("strategy", "predecessors", "leaves"),
    [
        ("concurrent", [[None]] * 5, [0, 1, 2, 3, 4]),
        ("sequential", [[None], [0], [1], [2], [3]], [4]),
        ("sequential_concurrent_chunk", [[None], [None], [0, 1], [0, 1], [2, 3]], [4]),
        ("concurrent_sequential_chunk", [[None], [0], [None], [2], [None]], [1, 3, 4]),
    ],
)
def test_an_uneven_expansion_links_and_leaves(
    strategy: str, predecessors: list[list[int | None]], leaves: list[int]
) -> None:
    builder = Builder()
    src = builder.add_operation("chat", node_id="src")
    kids = builder.expand_from_result(list("abcde"), src, "chat", strategy=strategy, chunk_size=2)
    named: dict[UUID, int | None] = {src: None, **{kid: i for i, kid in enumerate(kids)}}
    assert [[named[p] for p in builder.graph.predecessors(k)] for k in kids] == predecessors
    after = builder.add_aggregation("chat")  # its sources default to the graph's leaves
    assert sorted(kids.index(p) for p in builder.graph.predecessors(after)) == leaves


def test_conditional_branch_shape() -> None:
    builder = Builder()
    root = builder.add_operation("chat", node_id="root")
    ids = builder.add_conditional_branch("chat", "communicate", "communicate", instruction="ok?")
    assert builder.graph.predecessors(ids["check"]) == [root]
    for key in ("true", "false"):
        [edge] = builder.graph.incoming(ids[key])
        assert edge.head == ids["check"]
        assert edge.condition is not None
    [true_edge] = builder.graph.incoming(ids["true"])
    [false_edge] = builder.graph.incoming(ids["false"])
    assert true_edge.condition is not None
    assert false_edge.condition is not None
    assert true_edge.condition("yes") is True
    assert false_edge.condition("yes") is False
    assert false_edge.condition("") is True


def test_mermaid_text_renders_nodes_edges_and_progress() -> None:
    builder = Builder()
    a = builder.add_operation("chat", node_id="research")
    b = builder.add_operation("communicate", node_id='say "hi"', depends_on=[a])
    c = builder.add_operation("chat", depends_on=[b], condition=bool)
    graph = builder.get_graph()
    text = graph.to_mermaid()
    assert text.splitlines() == [
        "flowchart TD",
        '    n0["research<br/>chat"]',
        '    n1["say #quot;hi#quot;<br/>communicate"]',
        '    n2["chat"]',
        "    n0 --> n1",
        '    n1 -. "if" .-> n2',
    ]
    progress: dict[str, Any] = {
        "completed_operations": [a],
        "failed_operations": {b: ValueError()},
        "skipped_operations": [c],
    }
    styled = graph.to_mermaid(progress)
    assert "    class n0 completed" in styled
    assert "    class n1 failed" in styled
    assert "    class n2 skipped" in styled
