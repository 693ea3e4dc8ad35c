"""The upstream side of ``benchmarks.flow``: runs in the peers' own environment.

Started as ``python -P benchmarks/_flow_peer_worker.py`` (so this repository's ``lionagi`` is
not on the path and the upstream release is imported), in a scratch working directory. It reads
one JSON command per line on stdin and answers with one JSON line. Self-contained on purpose:
nothing from this repository is imported here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from importlib import metadata
from typing import Any

PROMPT = "hello there"
REPLY = "ok fine"
SYSTEM = "You are a helpful assistant."
INPUT_TOKENS = 9
OUTPUT_TOKENS = 2

now = time.perf_counter_ns
_MODEL: Any = None


def _model() -> Any:
    """The release's scripted model with its endpoint call replaced by an async function that
    answers at once with constant usage (the call every side of the comparison makes)."""
    global _MODEL
    if _MODEL is None:
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
        _MODEL = model
    return _MODEL


def _graph(shape: str, nodes: int) -> Any:
    from lionagi.operations.builder import OperationGraphBuilder

    builder = OperationGraphBuilder()
    previous = None
    for _ in range(nodes):
        depends = [previous] if shape == "deep" and previous is not None else None
        previous = builder.add_operation("communicate", depends_on=depends, instruction=PROMPT)
    return builder.get_graph()


async def _flow(shape: str, nodes: int, max_concurrent: int) -> dict[str, Any]:
    from lionagi import Branch, Session

    graph = _graph(shape, nodes)
    session = Session(default_branch=Branch(system=SYSTEM, chat_model=_model()))
    start = now()
    result = await session.flow(graph, max_concurrent=max_concurrent)
    elapsed = now() - start
    done = len(result["completed_operations"])
    if done != nodes:
        raise RuntimeError(f"upstream flow completed {done} of {nodes} nodes")
    return {"ns": elapsed}


async def _floor(nodes: int) -> dict[str, Any]:
    """The same turns without a flow: per node a clone of the default branch (what the
    release's flow makes per node) and one ``communicate``."""
    from lionagi import Branch

    base = Branch(system=SYSTEM, chat_model=_model())
    await base.clone().communicate(PROMPT)  # warm-up
    start = now()
    for _ in range(nodes):
        await base.clone().communicate(PROMPT)
    return {"ns": now() - start}


def _versions() -> dict[str, Any]:
    import lionagi

    out: dict[str, Any] = {"python": sys.version.split()[0], "lionagi_path": lionagi.__file__}
    for name in ("lionagi", "pydantic", "anyio"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def main() -> None:
    logging.disable(logging.CRITICAL)  # the upstream release logs every call at INFO
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        try:
            if op == "versions":
                answer = _versions()
            elif op == "flow":
                answer = asyncio.run(_flow(**request))
            elif op == "floor":
                answer = asyncio.run(_floor(**request))
            else:
                answer = {"error": f"unknown command {op!r}"}
        except Exception as exc:  # reported to the orchestrator, which records it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    # The release persists its logs at interpreter exit (minutes after a 1,000-node flow);
    # nothing here is measured any more, so leave without it.
    os._exit(0)


if __name__ == "__main__":
    main()
