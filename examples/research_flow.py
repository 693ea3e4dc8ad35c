"""Fan-out research, an aggregation, then a follow-up only when the summary asks for one.

Three research nodes run concurrently, each on its own fork of the session's default branch;
a summary node receives their results in its context; a check node decides whether a
follow-up question is needed, and only the matching side of the conditional runs. Runs offline
on a FunctionModel; pass a real model to ``main`` to use one instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import anyio

from lionagi import Branch, Builder, Instruction, Message, NodeEnd, Session, iModel
from lionagi.testing import FunctionModel

TOPICS = ("structured concurrency", "cancel scopes", "task groups")


def reply(messages: Sequence[Message], **options: Any) -> str:
    """An offline 'model': a short finding per topic, and a summary that names its sources."""
    last = messages[-1]
    assert isinstance(last, Instruction)
    if last.instruction and last.instruction.startswith("Summarize"):
        context = last.context if isinstance(last.context, dict) else {}
        found = sorted(k for k in context if k.endswith("_result"))
        return f"summary of {len(found)} findings; open question: how do they compose?"
    if last.instruction and last.instruction.startswith("Answer"):
        return "they nest: a task group is a cancel scope that waits for its tasks"
    return f"finding about {last.instruction}"


async def needs_follow_up(branch: Branch, context: Any = None) -> bool:
    """The check node: a plain async function of the branch and its context."""
    summary = str((context or {}).get("summary_result", ""))
    return "open question" in summary


async def main(model: iModel | None = None) -> dict[str, Any]:
    session = Session()
    session.new_branch(
        system="You are a careful researcher.", chat_model=model or FunctionModel(reply)
    )
    builder = Builder()
    for topic in TOPICS:
        builder.add_operation("communicate", node_id=topic, instruction=topic)
    builder.add_aggregation("communicate", node_id="summary", instruction="Summarize the findings")
    sides = builder.add_conditional_branch(
        needs_follow_up,
        "communicate",
        "chat",
        true_params={"instruction": "Answer the open question"},
        false_params={"instruction": "Say that nothing is left open"},
    )
    graph = builder.get_graph()
    finished: list[str] = []
    session.observe(
        NodeEnd, lambda signal, _: finished.append(graph.nodes[UUID(signal.op_id)].label)
    )

    result = await session.flow(graph, context={"audience": "library users"}, max_concurrent=3)
    answer = result["operation_results"].get(sides["true"])
    print(graph.to_mermaid(result))
    print("finished:", ", ".join(finished))
    print("follow-up:", answer)
    return {
        "finished": finished,
        "summary": result["final_context"]["summary_result"],
        "follow_up": answer,
        "skipped": [graph.nodes[i].label for i in result["skipped_operations"]],
        "branches": len(session),
    }


if __name__ == "__main__":
    anyio.run(main)
