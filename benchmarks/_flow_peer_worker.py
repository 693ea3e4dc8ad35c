"""The upstream side of ``benchmarks.flow``: runs in the peers' own environment.

Started as ``python -P benchmarks/_flow_peer_worker.py`` (so this repository's ``lionagi`` is
not on the path and the upstream release is imported), in a scratch working directory. It reads
one JSON command per line on stdin and answers with one JSON line. Nothing of this repository's
package is imported here; the upstream model comes from the turn comparison's worker.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import os
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

PROMPT = "hello there"
SYSTEM = "You are a helpful assistant."

now = time.perf_counter_ns


@functools.cache
def _sibling(name: str) -> Any:
    """A module beside this file (``-P`` keeps this directory off ``sys.path``)."""
    path = Path(__file__).resolve().parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_flow_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _model() -> Any:
    """The release's scripted model answering at once with constant usage, as the turn
    comparison's worker sets it up (the call every side of the comparison makes)."""
    return _sibling("_peer_worker")._Upstream.model()


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
