"""Every program in examples/ runs offline on both backends and does what its docstring says."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel

from lionagi.operations.turn import _active_turn_var

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: every example and the test below that checks what its main() returns
COVERED = (
    "chat",
    "tools",
    "structured_output",
    "react",
    "streaming_run",
    "observer_cancels_stream",
    "concurrent_callers_trio",
    "research_flow",
    "live_chat_trio",
)


def load(name: str) -> ModuleType:
    """A fresh copy of ``examples/<name>.py`` (module-level state is not shared by tests)."""
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_is_covered() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == sorted(COVERED)


@pytest.mark.parametrize("name", COVERED)
def test_example_runs_as_a_script(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


async def test_chat() -> None:
    out = await load("chat").main()
    assert out["replies"] == [
        "answer 1: you asked 'What is a turn?'",
        "answer 2: you asked 'And a scope?'",  # the second turn saw the first exchange
    ]
    assert out["history"] == ["system", "user", "assistant", "user", "assistant"]
    kinds = [kind for kind, _ in out["lifecycle"]]
    ids = [turn_id for _, turn_id in out["lifecycle"]]
    assert kinds == ["start", "end", "start", "end"]
    assert ids[0] == ids[1] != ids[2] == ids[3]
    assert None not in ids


async def test_tools() -> None:
    out = await load("tools").main()
    assert out["answer"] == "2 + 3 = 5, and it is sunny in Oslo."
    assert out["outputs"] == [5, "sunny in Oslo"]  # request order
    assert out["direct"] == 42
    assert out["refused"] is True
    assert out["history"] == [
        "instruction",
        "assistant",
        "action_request",
        "action_request",
        "action_response",
        "action_response",
        "instruction",  # operate's follow-up asking for the answer
        "assistant",
        "action_request",  # the direct act() calls
        "action_response",
        "action_request",
        "action_response",
    ]


async def test_structured_output() -> None:
    module = load("structured_output")
    out = await module.main()
    assert out["ada"] == module.Person(name="Ada Lovelace", born=1815)
    assert out["grace"] == out["grace_again"] == module.Person(name="Grace Hopper", born=1906)
    assert out["parse_calls"] == (0, 1)  # local repair first; the parse model only for prose
    alan = out["alan"]
    assert isinstance(alan, module.Person)
    assert issubclass(module.Person, BaseModel)
    assert (alan.name, alan.born) == ("Alan Turing", 1912)
    assert alan.reason.confidence_score == 0.95


async def test_react() -> None:
    out = await load("react").main()
    assert out["answer"].population == 709_000
    assert out["tools_run"] == ["population"]
    assert out["lifecycle"] == ["RunStart", "RunEnd"]  # every round inside one turn
    assert out["rounds"] >= 1


async def test_streaming_run() -> None:
    out = await load("streaming_run").main()
    assert out["streamed"] == [
        "instruction",
        "assistant",
        "action_request",
        "action_response",
        "assistant",
    ]
    assert out["terminals"] == ["RunEnd", "RunEnd"]  # closing early is a clean end
    # the early-closed run committed its instruction with the first reply
    assert out["history"] == [*out["streamed"], "instruction", "assistant"]
    assert _active_turn_var.get() is None


async def test_observer_cancels_stream() -> None:
    out = await load("observer_cancels_stream").main()
    assert out["seen"] == ["instruction", "assistant", "action_request"]
    assert out["terminals"] == ["RunEnd"]
    assert out["deleted"] == []  # stopped before the tool ran


async def test_concurrent_callers_trio() -> None:
    out = await load("concurrent_callers_trio").main()
    counts = sorted(int(reply.split(" saw ")[1].split()[0]) for reply in out["replies"])
    assert counts == [0, 1, 2, 3, 4]  # each turn saw every earlier one, whole
    assert out["history"] == ["system"] + ["user", "assistant"] * 5  # impatient left nothing
    assert out["other"] == "other branch saw 0 earlier question(s)"


async def test_research_flow() -> None:
    out = await load("research_flow").main()
    topics = {"structured concurrency", "cancel scopes", "task groups"}
    assert set(out["finished"][:3]) == topics  # the fan-out, in any order
    assert out["finished"][3] == "summary"
    assert out["summary"] == "summary of 3 findings; open question: how do they compose?"
    assert out["follow_up"] == "they nest: a task group is a cancel scope that waits for its tasks"
    assert [label.split(":")[0] for label in out["skipped"]] == ["chat"]  # the false side
    assert out["branches"] == 1 + 6  # the default branch and one fork per node that ran


async def test_live_chat_trio() -> None:
    out = await load("live_chat_trio").main()
    assert out["shown"] == [
        "I will multiply the two numbers.",
        "[calling multiply]",
        "[running multiply({'a': 6, 'b': 7})]",
        "[result: 42]",
        "The tool says the product is 42.",
        "6 times 7 is 42.",
    ]
    assert out["history"] == [
        "System",
        "Instruction",  # round 1: analysis and the tool call
        "AssistantResponse",
        "ActionRequest",
        "ActionResponse",
        "Instruction",  # round 2
        "AssistantResponse",
        "Instruction",  # the final answer
        "AssistantResponse",
    ]
