"""Build operation graphs step by step: ``Builder`` (also ``OperationGraphBuilder``).

Each ``add_*`` call validates the node's parameters against its operation at once, so a typo
is an error where the graph is built, not when a flow reaches the node. ``get_graph()`` returns
the :class:`~lionagi.operations.graph.OperationGraph` after checking it has no cycle; run it
with :meth:`~lionagi.session.session.Session.flow`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, TypeAlias
from uuid import UUID

from pydantic import BaseModel

from lionagi.errors import FlowError
from lionagi.operations.graph import (
    Condition,
    NodeRef,
    OperationGraph,
    OperationNode,
    ResultCondition,
    validate_operation,
)

__all__ = ["Builder", "ExpansionStrategy", "OperationGraphBuilder"]

Operation = str | Callable[..., Any]


class ExpansionStrategy(StrEnum):
    """How :meth:`OperationGraphBuilder.expand_from_result` links the nodes it adds."""

    CONCURRENT = "concurrent"  # source -> each item
    SEQUENTIAL = "sequential"  # source -> item0 -> item1 -> ...
    SEQUENTIAL_CONCURRENT_CHUNK = "sequential_concurrent_chunk"  # chunks in sequence
    CONCURRENT_SEQUENTIAL_CHUNK = "concurrent_sequential_chunk"  # chains side by side


class OperationGraphBuilder:
    """Adds operations with dependencies to one graph; ``get_graph()`` returns it.

    An operation is a Branch operation name (``"communicate"``, ``"operate"``, ``"chat"``,
    ``"ReAct"``, ``"parse"``, ``"interpret"``, ...) or a callable ``(branch, **parameters)``.
    Node ids are UUIDs; ``node_id="name"`` gives a node a name usable wherever a node is
    expected (``depends_on=["name"]``) and in the flow's context keys.
    """

    def __init__(self, name: str = "DynamicGraph") -> None:
        self.name = name
        self.graph = OperationGraph(name)
        self._heads: dict[UUID, None] = {}  # the current leaves (ordered), for aggregations
        self.last_operation_id: UUID | None = None

    # -- nodes ---------------------------------------------------------------------------
    def add_operation(
        self,
        operation: Operation,
        node_id: str | None = None,
        depends_on: NodeRef | Iterable[NodeRef] | None = None,
        inherit_context: bool = False,
        branch: Any = None,
        *,
        condition: Condition | None = None,
        conditions: Mapping[Any, Condition] | None = None,
        edge_label: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        parameters: Mapping[str, Any] | None = None,
        **operation_params: Any,
    ) -> UUID:
        """Add one node; returns its id.

        ``depends_on`` is a node (id, name) or a list of them. ``inherit_context=True`` runs
        the node on its first dependency's branch, continuing that conversation; ``branch=``
        (a Branch, its id or name) pins the node to a branch; otherwise the node runs on a
        fork of the flow's default branch. ``condition`` (with one dependency) or
        ``conditions`` (dependency -> condition) gate the node on the dependencies' results.
        ``parameters`` and ``**operation_params`` are the operation's parameters;
        ``edge_label`` labels the dependency edges in :meth:`OperationGraph.to_mermaid`.
        """
        deps = self._refs(depends_on)
        params = {**(parameters or {}), **operation_params}
        node = self._node(operation, params, node_id, branch, inherit_context, deps, metadata)
        edge_conditions = self._conditions(deps, condition, conditions)
        self._insert(node, deps, edge_conditions, label=edge_label)
        return node.id

    def then(self, previous: NodeRef, operation: Operation, **kwargs: Any) -> UUID:
        """Add a node that depends on ``previous``."""
        return self.add_operation(operation, depends_on=[previous], **kwargs)

    def add_aggregation(
        self,
        operation: Operation,
        node_id: str | None = None,
        source_node_ids: Sequence[NodeRef] | None = None,
        inherit_context: bool = False,
        inherit_from_source: int = 0,
        branch: Any = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        parameters: Mapping[str, Any] | None = None,
        **operation_params: Any,
    ) -> UUID:
        """Add a node that depends on every source (default: the current leaves); its
        instruction context carries the sources' results. ``inherit_context=True`` continues
        the conversation of ``source_node_ids[inherit_from_source]``."""
        sources = self._refs(source_node_ids) if source_node_ids is not None else [*self._heads]
        if not sources:
            raise FlowError("add_aggregation: no source nodes; add operations first or pass them")
        if not 0 <= inherit_from_source < len(sources):
            raise FlowError(
                f"add_aggregation: inherit_from_source={inherit_from_source} is out of range "
                f"for {len(sources)} sources"
            )
        params = {**(parameters or {}), **operation_params}
        deps = sources[inherit_from_source:] + sources[:inherit_from_source]
        node = self._node(operation, params, node_id, branch, inherit_context, deps, metadata)
        node.aggregation = True
        self._insert(node, sources, {}, label=None)
        return node.id

    def expand_from_result(
        self,
        items: Iterable[Any],
        source_node_id: NodeRef,
        operation: Operation,
        strategy: ExpansionStrategy | str = ExpansionStrategy.CONCURRENT,
        inherit_context: bool = False,
        *,
        chain_context: bool = False,
        chunk_size: int | None = None,
        branch: Any = None,
        **shared_params: Any,
    ) -> list[UUID]:
        """Add one node per item after ``source_node_id``; returns their ids.

        A pydantic item supplies that node's parameters (``shared_params`` win); any other
        item reaches the node's context as ``item`` (with ``item_index``).
        ``strategy`` links them: ``concurrent`` (all after the source), ``sequential`` (a
        chain), or chunks of ``chunk_size`` run in sequence (``sequential_concurrent_chunk``)
        or as parallel chains (``concurrent_sequential_chunk``). With ``inherit_context`` each
        node continues the source's conversation (``chain_context``: the previous item's, in a
        sequential chain).
        """
        chosen, size = _expansion_strategy(strategy, chunk_size)
        source = self.graph.resolve(source_node_id)
        item_list = list(items)
        layout, leaves = _expansion_layout(chosen, len(item_list), size)
        created: list[UUID] = []
        for index, (item, deps) in enumerate(zip(item_list, layout, strict=True)):
            refs = [source if dep is None else created[dep] for dep in deps]
            params = self._item_params(item, index, shared_params)
            primary = [refs[0] if chain_context else source]
            origin = {
                "expansion_source": source,
                "expansion_index": index,
                "expansion_strategy": chosen.value,
            }
            node = self._node(operation, params, None, branch, inherit_context, primary, origin)
            self.graph.add_node(node)
            for ref in refs:
                self.graph.add_edge(ref, node.id, label=None)
            created.append(node.id)
        self._heads.pop(source, None)
        self._heads.update(dict.fromkeys(created[leaf] for leaf in leaves))
        if created:
            self.last_operation_id = created[-1]
        return created

    def add_conditional_branch(
        self,
        condition_check_op: Operation,
        true_op: Operation,
        false_op: Operation | None = None,
        *,
        depends_on: NodeRef | Iterable[NodeRef] | None = None,
        condition_key: str | None = None,
        condition_value: Any = True,
        true_condition: Condition | None = None,
        false_condition: Condition | None = None,
        true_params: Mapping[str, Any] | None = None,
        false_params: Mapping[str, Any] | None = None,
        **check_params: Any,
    ) -> dict[str, UUID]:
        """Add a check node and the node(s) that run when its result holds or not.

        The check depends on ``depends_on`` (default: the current leaves). By default the true
        node runs when the check's result is truthy and the false node otherwise; with
        ``condition_key`` the value at that key must equal ``condition_value``. Returns
        ``{"check": id, "true": id, "false": id}`` (no ``"false"`` without ``false_op``).
        """
        test: dict[str, Any] = {}
        if condition_key is not None:
            test = {"key": condition_key, "equals": condition_value, "use_equals": True}
        sides = [("true", true_op, true_condition or ResultCondition(**test), true_params)]
        if false_op is not None:
            fails = false_condition or ResultCondition(**test, negate=True)
            sides.append(("false", false_op, fails, false_params))
        deps = self._refs(depends_on) if depends_on is not None else [*self._heads]
        check = self.add_operation(condition_check_op, depends_on=deps, **check_params)
        ids = {"check": check}
        for side, operation, condition, params in sides:
            ids[side] = self.add_operation(
                operation,
                depends_on=[check],
                condition=condition,
                edge_label=f"if {side}",
                parameters=params,
            )
        self._heads = {i: None for key, i in ids.items() if key != "check"}
        return ids

    def add_edge(self, head: NodeRef, tail: NodeRef, *, condition: Condition | None = None) -> None:
        """Make an existing node ``tail`` depend on an existing node ``head``.

        This is the one way to add a cycle by mistake; :meth:`get_graph` rejects it.
        """
        self.graph.add_edge(head, tail, condition=condition)
        self._heads.pop(self.graph.resolve(head), None)

    # -- the result ----------------------------------------------------------------------
    def get_graph(self) -> OperationGraph:
        """The graph, after checking it is acyclic (raises :class:`GraphCycleError`)."""
        return self.graph.validate()

    def get_node_by_reference(self, reference_id: str) -> OperationNode | None:
        """The node named ``reference_id`` at build time, or None."""
        try:
            return self.graph.get_node(reference_id)
        except FlowError:
            return None

    def visualize_state(self) -> dict[str, Any]:
        """A summary of the graph: node and edge counts, roots, leaves, current heads."""
        nodes = self.graph.nodes
        return {
            "name": self.name,
            "total_nodes": len(nodes),
            "edges": len(self.graph.edges),
            "roots": [i for i in nodes if not self.graph.predecessors(i)],
            "leaves": [i for i in nodes if not self.graph.successors(i)],
            "current_heads": [*self._heads],
        }

    # -- helpers -------------------------------------------------------------------------
    def _refs(self, refs: NodeRef | Iterable[NodeRef] | None) -> list[UUID]:
        if refs is None:
            return []
        if isinstance(refs, str | UUID | OperationNode):
            refs = [refs]
        return [self.graph.resolve(ref) for ref in refs]

    def _node(
        self,
        operation: Operation,
        params: dict[str, Any],
        name: str | None,
        branch: Any,
        inherit_context: bool,
        deps: Sequence[UUID],
        metadata: Mapping[str, Any] | None,
    ) -> OperationNode:
        """A checked node: ``deps`` lists the dependency it would inherit from first."""
        where = f"node {name!r}" if name else f"node #{len(self.graph) + 1}"
        if name is not None:
            self._check_name(name)
        validate_operation(operation, params, where)
        if inherit_context:
            _check_inherit(where, deps, branch)
        return OperationNode(
            operation=operation,
            parameters=params,
            name=name,
            branch=branch,
            inherit_context=inherit_context,
            primary_dependency=deps[0] if inherit_context else None,
            metadata=dict(metadata or {}),
        )

    def _check_name(self, name: object) -> None:
        if not isinstance(name, str) or not name:
            raise FlowError(f"node_id must be a non-empty string name, got {name!r}")
        if name in self.graph:
            raise FlowError(f"node name {name!r} is already used in this graph; names are unique")

    def _conditions(
        self,
        deps: list[UUID],
        condition: Condition | None,
        conditions: Mapping[Any, Condition] | None,
    ) -> dict[UUID, Condition]:
        if condition is not None:
            if conditions:
                raise FlowError("pass condition= or conditions=, not both")
            if len(deps) != 1:
                raise FlowError(
                    f"condition= needs exactly one dependency, got {len(deps)}; use "
                    "conditions={dependency: condition}"
                )
            return {deps[0]: condition}
        out: dict[UUID, Condition] = {}
        for ref, cond in (conditions or {}).items():
            dep = self.graph.resolve(ref)
            if dep not in deps:
                raise FlowError(f"conditions names {ref!r}, which is not in depends_on")
            out[dep] = cond
        return out

    def _insert(
        self,
        node: OperationNode,
        deps: list[UUID],
        conditions: Mapping[UUID, Condition],
        label: str | None = None,
    ) -> None:
        self.graph.add_node(node)
        for dep in deps:
            self.graph.add_edge(dep, node.id, condition=conditions.get(dep), label=label)
        for dep in deps:
            self._heads.pop(dep, None)
        self._heads[node.id] = None
        self.last_operation_id = node.id

    @staticmethod
    def _item_params(item: Any, index: int, shared: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(item, BaseModel):  # e.g. an instruction model from an operate() result
            return {**item.model_dump(), **shared}
        context = shared.get("context")
        merged = dict(context) if isinstance(context, Mapping) else {}
        if context is not None and not isinstance(context, Mapping):
            merged["original_context"] = context
        merged.update({"item": item, "item_index": index})
        return {**shared, "context": merged}


#: The upstream short name.
Builder = OperationGraphBuilder


def _check_inherit(where: str, deps: Sequence[UUID], branch: Any) -> None:
    """``inherit_context=True`` needs a dependency to continue and no pinned branch."""
    if not deps:
        raise FlowError(f"{where}: inherit_context=True needs a dependency to inherit from")
    if branch is not None:
        raise FlowError(
            f"{where}: pass either inherit_context=True (continue the dependency's "
            "branch) or branch=..., not both"
        )


def _expansion_strategy(
    strategy: ExpansionStrategy | str, chunk_size: int | None
) -> tuple[ExpansionStrategy, int]:
    """The strategy ``expand_from_result`` was given, and its chunk size (0 when unchunked)."""
    try:
        chosen = ExpansionStrategy(strategy)
    except ValueError:
        known = ", ".join(s.value for s in ExpansionStrategy)
        raise FlowError(f"unknown expansion strategy {strategy!r}; use one of {known}") from None
    if chosen not in _CHUNKED:
        return chosen, 0
    if chunk_size is None or chunk_size <= 0:
        raise FlowError(f"strategy {chosen.value!r} needs chunk_size > 0")
    return chosen, chunk_size


_CHUNKED = frozenset(
    {ExpansionStrategy.SEQUENTIAL_CONCURRENT_CHUNK, ExpansionStrategy.CONCURRENT_SEQUENTIAL_CHUNK}
)


_Layout: TypeAlias = tuple[list[list[int | None]], list[int]]


def _expansion_layout(strategy: ExpansionStrategy, count: int, size: int) -> _Layout:
    """How ``count`` expanded items link: for each, the earlier items it depends on (``None``:
    the source), and which items are the new leaves of the graph."""
    return _LAYOUTS[strategy](count, size)


def _all_after_source(count: int, size: int) -> _Layout:
    return [[None] for _ in range(count)], list(range(count))


def _one_chain(count: int, size: int) -> _Layout:
    return [[i - 1] if i else [None] for i in range(count)], list(range(count))[-1:]


def _chunk_after_chunk(count: int, size: int) -> _Layout:
    """Each chunk's items run together, after every item of the chunk before."""
    layout: list[list[int | None]] = []
    for i in range(count):
        start = i - i % size
        layout.append(list(range(start - size, start)) if start else [None])
    last = (count - 1) - (count - 1) % size if count else count
    return layout, list(range(last, count))


def _chain_per_chunk(count: int, size: int) -> _Layout:
    """Each chunk is a chain of its own; the chains run side by side."""
    layout: list[list[int | None]] = [[i - 1] if i % size else [None] for i in range(count)]
    return layout, [min(start + size, count) - 1 for start in range(0, count, size)]


_LAYOUTS: Mapping[ExpansionStrategy, Callable[[int, int], _Layout]] = {
    ExpansionStrategy.CONCURRENT: _all_after_source,
    ExpansionStrategy.SEQUENTIAL: _one_chain,
    ExpansionStrategy.SEQUENTIAL_CONCURRENT_CHUNK: _chunk_after_chunk,
    ExpansionStrategy.CONCURRENT_SEQUENTIAL_CHUNK: _chain_per_chunk,
}
