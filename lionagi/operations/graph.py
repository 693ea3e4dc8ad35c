"""The operation graph a :class:`~lionagi.operations.builder.Builder` produces.

Nodes are operations (a Branch operation name or an async callable) with their parameters;
an edge ``head -> tail`` says ``tail`` depends on ``head`` and may carry a condition over the
head's result. The graph is plain data: it knows nothing about sessions or runs, so one graph
can be run by several :meth:`~lionagi.session.session.Session.flow` calls.
"""

from __future__ import annotations

import functools
import heapq
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias
from uuid import UUID, uuid4

from lionagi.errors import FlowError, GraphCycleError, OperationError
from lionagi.operations.params import OPERATION_PARAMS, known_names

__all__ = [
    "NODE_OPERATIONS",
    "Condition",
    "Edge",
    "NodeRef",
    "OperationGraph",
    "OperationNode",
    "ResultCondition",
]

#: A condition over a dependency's result: ``condition(result) -> bool`` (sync or async).
Condition = Callable[[Any], bool | Awaitable[bool]]

#: Branch operations a node may name, and the parameter that names an explicit model for it.
NODE_OPERATIONS: Mapping[str, str | None] = {
    "chat": "imodel",
    "chat_and_record": "imodel",
    "communicate": "chat_model",
    "operate": "chat_model",
    "parse": "parse_model",
    "interpret": "interpret_model",
    "ReAct": "chat_model",
    "ReActStream": "chat_model",
    "run": "chat_model",
    "act": None,
}


@dataclass(frozen=True, slots=True)
class ResultCondition:
    """An edge condition over the dependency's result.

    ``key`` reads a dotted path from the result (mapping keys or attributes). With
    ``use_equals`` the value must equal ``equals``; otherwise its truthiness must be
    ``expected_truthy``. ``negate`` inverts the outcome.
    """

    key: str | None = None
    equals: Any = None
    use_equals: bool = False
    expected_truthy: bool = True
    negate: bool = False

    def __call__(self, result: Any) -> bool:
        value = result
        if self.key:
            for part in self.key.split("."):
                if isinstance(value, Mapping):
                    value = value.get(part)
                else:
                    value = getattr(value, part, None)
                if value is None:
                    break
        matched = value == self.equals if self.use_equals else bool(value) is self.expected_truthy
        return matched is not self.negate


@dataclass(eq=False, slots=True)
class OperationNode:
    """One operation of a graph. ``name`` is the optional reference given at build time."""

    operation: str | Callable[..., Any]
    parameters: dict[str, Any]
    name: str | None = None
    branch: Any = None  # a Branch, its id, or its name; None: a fork of the default branch
    inherit_context: bool = False
    primary_dependency: UUID | None = None
    aggregation: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    id: UUID = field(default_factory=uuid4)

    @property
    def operation_name(self) -> str:
        op = self.operation
        return op if isinstance(op, str) else getattr(op, "__name__", type(op).__name__)

    @property
    def label(self) -> str:
        """The name given at build time, else the operation and a short id."""
        return self.name or f"{self.operation_name}:{str(self.id)[:8]}"

    def accepts_context(self) -> bool:
        """Whether the flow can hand this node its dependencies' results as ``context=``."""
        return _accepts_context(_signature_target(self.operation), isinstance(self.operation, str))

    def model_parameter(self) -> str | None:
        """The parameter that names an explicit model for this node's operation, if any."""
        if isinstance(self.operation, str):
            return NODE_OPERATIONS.get(self.operation)
        return None


#: A node named where the graph expects one: the node, its id (or the id as text) or its name.
NodeRef: TypeAlias = OperationNode | UUID | str


@dataclass(frozen=True, slots=True)
class Edge:
    """``tail`` depends on ``head``; with a ``condition``, ``tail`` runs along this edge only
    if the condition holds for the head's result."""

    head: UUID
    tail: UUID
    condition: Condition | None = None
    label: str | None = None


def _signature_target(operation: str | Callable[..., Any]) -> Callable[..., Any]:
    if isinstance(operation, str):
        from lionagi.session.branch import Branch

        method: Callable[..., Any] = getattr(Branch, operation)
        return method
    return operation


@functools.lru_cache(maxsize=512)
def _signature(target: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(target)


@functools.lru_cache(maxsize=512)
def _accepts_context(target: Callable[..., Any], branch_method: bool) -> bool:
    params = _signature(target).parameters.values()
    if branch_method:  # the **options of a Branch method are model options, not context
        return any(p.name == "context" for p in params)
    return any(p.name == "context" or p.kind is p.VAR_KEYWORD for p in params)


def validate_operation(
    operation: str | Callable[..., Any], parameters: Mapping[str, Any], where: str
) -> None:
    """Check at build time that ``operation`` exists and accepts ``parameters``.

    A Branch operation is checked against its method signature; a callable against
    ``(branch, **parameters)``. Raises :class:`OperationError` naming the node and the value.
    """
    _check_operation(operation, where)
    if "branch" in parameters:
        raise OperationError(
            f"{where}: 'branch' is the node's branch, not an operation parameter; pass "
            "branch= to add_operation"
        )
    name = operation if isinstance(operation, str) else getattr(operation, "__name__", "?")
    signature = _signature(_signature_target(operation))
    accepts = _accepted_names(operation, signature)
    unknown = [] if accepts is None else [key for key in parameters if key not in accepts]
    if unknown:
        raise OperationError(
            f"{where}: {name}() has no parameter {', '.join(map(repr, unknown))}; it takes "
            f"{', '.join(sorted(accepts or ())) or 'no parameters'}"
        )
    try:
        signature.bind(None, **parameters)
    except TypeError as exc:
        raise OperationError(f"{where}: {name}() cannot take these parameters: {exc}") from None


def _check_operation(operation: object, where: str) -> None:
    """An operation is a Branch operation's name or a callable."""
    if isinstance(operation, str):
        if operation not in NODE_OPERATIONS:
            known = ", ".join(NODE_OPERATIONS)
            raise OperationError(
                f"{where}: unknown operation {operation!r}; use one of {known}, or pass an "
                "async callable (branch, **parameters)"
            )
    elif not callable(operation):
        raise OperationError(
            f"{where}: operation must be an operation name or a callable, got "
            f"{type(operation).__name__}"
        )


def _accepted_names(
    operation: str | Callable[..., Any], signature: inspect.Signature
) -> set[str] | None:
    """The keywords ``operation`` takes after its Branch; ``None`` for a callable that takes
    any (``**kwargs``). A Branch method's ``**options`` are its model options."""
    accepted = list(signature.parameters.values())[1:]  # after self / branch
    branch_method = isinstance(operation, str)
    if not branch_method and any(p.kind is p.VAR_KEYWORD for p in accepted):
        return None
    names = {p.name for p in accepted if p.kind not in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY)}
    if isinstance(operation, str):
        names.update(known_names(OPERATION_PARAMS[operation]))
    return names


class OperationGraph:
    """A directed acyclic graph of :class:`OperationNode` in insertion order."""

    __slots__ = ("_incoming", "_outgoing", "_refs", "name", "nodes")

    def __init__(self, name: str = "DynamicGraph") -> None:
        self.name = name
        self.nodes: dict[UUID, OperationNode] = {}
        self._refs: dict[str, UUID] = {}
        self._incoming: dict[UUID, list[Edge]] = {}
        self._outgoing: dict[UUID, list[Edge]] = {}

    # -- building ------------------------------------------------------------------------
    def add_node(self, node: OperationNode) -> UUID:
        if node.id in self.nodes:
            raise FlowError(f"node {node.label} is already in the graph")
        if node.name is not None:
            if node.name in self._refs:
                raise FlowError(
                    f"node name {node.name!r} is already used in this graph; names are unique"
                )
            self._refs[node.name] = node.id
        self.nodes[node.id] = node
        self._incoming[node.id] = []
        self._outgoing[node.id] = []
        return node.id

    def add_edge(
        self,
        head: NodeRef,
        tail: NodeRef,
        *,
        condition: Condition | None = None,
        label: str | None = None,
    ) -> Edge:
        """Make ``tail`` depend on ``head`` (each a node, its id or its name)."""
        if condition is not None and not callable(condition):
            raise FlowError(f"edge condition must be callable (result) -> bool, got {condition!r}")
        edge = Edge(self.resolve(head), self.resolve(tail), condition, label)
        if edge.head == edge.tail:
            raise GraphCycleError([self.nodes[edge.head].label])
        if any(e.head == edge.head for e in self._incoming[edge.tail]):
            raise FlowError(
                f"{self.nodes[edge.tail].label} already depends on {self.nodes[edge.head].label}"
            )
        self._incoming[edge.tail].append(edge)
        self._outgoing[edge.head].append(edge)
        return edge

    # -- reading -------------------------------------------------------------------------
    def resolve(self, ref: NodeRef) -> UUID:
        """The id of the node ``ref`` names: a node, its id (or id string) or its name."""
        if isinstance(ref, OperationNode):
            ref = ref.id
        if isinstance(ref, UUID):
            if ref in self.nodes:
                return ref
        elif isinstance(ref, str):
            if ref in self._refs:
                return self._refs[ref]
            try:
                as_id = UUID(ref)
            except ValueError:
                as_id = None
            if as_id is not None and as_id in self.nodes:
                return as_id
        raise FlowError(f"no node {ref!r} in graph {self.name!r}")

    def get_node(self, ref: NodeRef) -> OperationNode:
        return self.nodes[self.resolve(ref)]

    def incoming(self, node_id: UUID) -> list[Edge]:
        return self._incoming[node_id]

    def predecessors(self, node_id: UUID) -> list[UUID]:
        return [edge.head for edge in self._incoming[node_id]]

    def successors(self, node_id: UUID) -> list[UUID]:
        return [edge.tail for edge in self._outgoing[node_id]]

    @property
    def edges(self) -> list[Edge]:
        return [edge for edges in self._incoming.values() for edge in edges]

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[OperationNode]:
        return iter(self.nodes.values())

    def __contains__(self, ref: object) -> bool:
        if not isinstance(ref, OperationNode | UUID | str):
            return False
        try:
            self.resolve(ref)
        except FlowError:
            return False
        return True

    # -- checks and order ----------------------------------------------------------------
    def find_cycle(self) -> list[UUID] | None:
        """One dependency cycle (its node ids in order), or None when the graph is acyclic."""
        white, grey, black = 0, 1, 2
        color = dict.fromkeys(self.nodes, white)
        for start in self.nodes:
            if color[start] != white:
                continue
            path: list[UUID] = [start]
            stack: list[Iterator[UUID]] = [iter(self.successors(start))]
            color[start] = grey
            while stack:
                child = next(stack[-1], None)
                if child is None:
                    stack.pop()
                    color[path.pop()] = black
                elif color[child] == grey:
                    return path[path.index(child) :]
                elif color[child] == white:
                    color[child] = grey
                    path.append(child)
                    stack.append(iter(self.successors(child)))
        return None

    def validate(self) -> OperationGraph:
        """Raise :class:`GraphCycleError` naming a cycle, if there is one; return the graph."""
        cycle = self.find_cycle()
        if cycle is not None:
            raise GraphCycleError([self.nodes[node_id].label for node_id in cycle])
        return self

    def topological_order(self) -> list[UUID]:
        """Every node after its dependencies; among ready nodes, insertion order first."""
        index = {node_id: i for i, node_id in enumerate(self.nodes)}
        remaining = {node_id: len(edges) for node_id, edges in self._incoming.items()}
        ready = [index[node_id] for node_id, count in remaining.items() if count == 0]
        ids = list(self.nodes)
        order: list[UUID] = []
        while ready:
            node_id = ids[heapq.heappop(ready)]
            order.append(node_id)
            for succ in self.successors(node_id):
                remaining[succ] -= 1
                if remaining[succ] == 0:
                    heapq.heappush(ready, index[succ])
        if len(order) != len(self.nodes):
            self.validate()
        return order

    # -- rendering -----------------------------------------------------------------------
    def to_mermaid(self, result: Mapping[str, Any] | None = None, *, direction: str = "TD") -> str:
        """Mermaid flowchart text of the graph.

        Pass a :meth:`~lionagi.session.session.Session.flow` result (or a mapping of node id
        to status) to colour nodes by how they ended: completed, failed, skipped, cancelled.
        """
        status = _statuses(result) if result is not None else {}
        key = {node_id: f"n{i}" for i, node_id in enumerate(self.nodes)}
        lines = [f"flowchart {direction}"]
        lines += (
            f'    {key[node_id]}["{_mermaid_label(node)}"]' for node_id, node in self.nodes.items()
        )
        lines += (_mermaid_edge(edge, key) for edge in self.edges)
        lines += _mermaid_classes(status, key)
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        edges = len(self.edges)
        return f"OperationGraph(name={self.name!r}, nodes={len(self.nodes)}, edges={edges})"


_MERMAID_STYLES = {
    "completed": "fill:#d4edda,stroke:#2e7d32",
    "failed": "fill:#f8d7da,stroke:#c62828",
    "skipped": "fill:#eeeeee,stroke:#9e9e9e,stroke-dasharray:4",
    "cancelled": "fill:#fff3cd,stroke:#f9a825",
    "running": "fill:#d0e4ff,stroke:#1565c0",
}


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;")


def _mermaid_label(node: OperationNode) -> str:
    text = node.operation_name
    return _mermaid_text(text if node.name is None else f"{node.name}<br/>{text}")


def _mermaid_edge(edge: Edge, key: Mapping[UUID, str]) -> str:
    if edge.condition is None and edge.label is None:
        return f"    {key[edge.head]} --> {key[edge.tail]}"
    return f'    {key[edge.head]} -. "{_mermaid_text(edge.label or "if")}" .-> {key[edge.tail]}'


def _mermaid_classes(status: Mapping[UUID, str], key: Mapping[UUID, str]) -> list[str]:
    """The style classes of the states that occur, and each node's class."""
    used = set(status.values())
    lines = [
        f"    classDef {name} {style}" for name, style in _MERMAID_STYLES.items() if name in used
    ]
    lines += (
        f"    class {key[node_id]} {state}"
        for node_id, state in status.items()
        if node_id in key and state in _MERMAID_STYLES
    )
    return lines


def _statuses(result: Mapping[str, Any]) -> dict[UUID, str]:
    if "completed_operations" not in result:
        return {_as_uuid(k): str(v) for k, v in result.items()}
    status: dict[UUID, str] = {}
    for state, key in (
        ("completed", "completed_operations"),
        ("failed", "failed_operations"),
        ("skipped", "skipped_operations"),
        ("cancelled", "cancelled_operations"),
    ):
        for node_id in result.get(key) or ():
            status[_as_uuid(node_id)] = state
    return status


def _as_uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))
