"""The tracing benchmark's trees without the instrumentation hooks and without only the
tracer's checks: every removal applies to this tree, the stripped trees still run turns and
streams (the first writing no log record, the second the same records as this tree), and a
removal that no longer matches the code, or a hook left behind, stops the run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.tracing import strip_hooks, strip_tracer

ROOT = Path(__file__).resolve().parents[1]

_PROGRAM = """
import json
import anyio
import lionagi
from lionagi import Branch
from lionagi.testing import FunctionModel

async def main():
    branch = Branch(chat_model=FunctionModel(lambda messages, **options: "ok"))
    said = await branch.chat_and_record("hello")
    streamed = [getattr(event, "text", "") async for event in branch.stream("again")]
    return said, "".join(streamed), len(branch.logs)

out = {"file": lionagi.__file__}
for backend in ("asyncio", "trio"):
    out[backend] = anyio.run(main, backend=backend)
print(json.dumps(out))
"""


def _run(tree: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_tree_without_hooks_runs_turns_and_streams_and_logs_no_model_call(
    tmp_path: Path,
) -> None:
    stripped = strip_hooks(ROOT, tmp_path)
    text = (stripped / "lionagi" / "service" / "imodel.py").read_text()
    assert "_instrument.invoke" not in text
    assert "_instrument.stream" not in text
    bare = _run(stripped)
    assert Path(str(bare["file"])).resolve().is_relative_to(stripped.resolve())
    # the same program on this tree: the same replies, and one log record per model call
    assert bare["asyncio"] == bare["trio"] == ["ok", "ok", 0]
    hooked = _run(ROOT)
    assert hooked["asyncio"] == hooked["trio"] == ["ok", "ok", 2]


def test_the_tree_without_the_tracers_checks_runs_turns_and_streams_and_logs_each_call(
    tmp_path: Path,
) -> None:
    stripped = strip_tracer(ROOT, tmp_path)
    text = (stripped / "lionagi" / "_instrument.py").read_text()
    assert "tracer.model_call" not in text
    assert "_instrument.tracer" not in (stripped / "lionagi" / "operations" / "turn.py").read_text()
    bare = _run(stripped)
    assert Path(str(bare["file"])).resolve().is_relative_to(stripped.resolve())
    assert bare["asyncio"] == bare["trio"] == ["ok", "ok", 2]


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT / "lionagi", tree / "lionagi", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tree


def test_a_removal_that_no_longer_matches_the_code_stops_the_run(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    imodel = tree / "lionagi" / "service" / "imodel.py"
    text = imodel.read_text()
    imodel.write_text(text.replace("_instrument.stream_log(self, request)", "None", 1))
    with pytest.raises(RuntimeError, match=r"stream_log.*matched 0 times in lionagi/service"):
        strip_hooks(tree, tmp_path / "out")


@pytest.mark.parametrize(
    ("strip", "hook", "message"),
    [
        (
            strip_hooks,
            "_instrument.tool_call",
            r"turn\.py still calls _instrument\.\{'tool_call'\}",
        ),
        (strip_tracer, "_instrument.tracer", r"turn\.py still has \{'_instrument\.tracer'\}"),
    ],
    ids=["hooks", "tracer"],
)
def test_a_hook_left_in_a_stripped_file_stops_the_run(
    tmp_path: Path, strip: Callable[[Path, Path], Path], hook: str, message: str
) -> None:
    tree = _copy(tmp_path)
    turn = tree / "lionagi" / "operations" / "turn.py"
    turn.write_text(turn.read_text() + f"\n_HOOK = {hook}\n")
    with pytest.raises(RuntimeError, match=message):
        strip(tree, tmp_path / "out")
