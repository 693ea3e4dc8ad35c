"""``python -m lionagi demo``: runs offline on both backends and prints a consistent timeline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

import lionagi
from lionagi.__main__ import main
from tests.payloads import DONE, chunk, completion
from tests.service.http_server import AWAIT_CLOSE, Reply, ScriptedServer

EVENT = re.compile(r"^\[(\d+)\] (?:turn ([0-9a-f]{6})\.\. )?(.*)$")
TERMINAL = re.compile(r"^Run(End|Failed) ")


@dataclass(frozen=True)
class Event:
    step: int
    turn: str | None
    text: str


def events(output: str) -> list[Event]:
    found = []
    for line in output.splitlines():
        match = EVENT.match(line)
        if match:
            found.append(Event(int(match[1]), match[2], match[3]))
    return found


def check_timeline(output: str) -> list[Event]:
    """The invariants every demo timeline holds, on any model; returns the events."""
    timeline = events(output)
    assert [e.step for e in timeline] == list(range(1, len(timeline) + 1))
    open_turn: str | None = None
    started: list[str] = []
    for event in timeline:
        if event.text.startswith("RunStart "):
            assert open_turn is None, f"turn {event.turn} started inside turn {open_turn}"
            assert event.turn is not None
            assert event.turn not in started
            open_turn = event.turn
            started.append(event.turn)
        elif TERMINAL.match(event.text):
            assert event.turn == open_turn, f"terminal of {event.turn} while {open_turn} is open"
            open_turn = None
        elif event.text.startswith("MessageAdded "):
            assert event.turn == open_turn, "a message was added outside its own turn"
    assert open_turn is None, f"turn {open_turn} has no terminal"
    return timeline


def demo_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIONAGI_DEMO_")}
    env["NO_COLOR"] = "1"
    return env


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_offline_demo_prints_a_consistent_timeline(backend: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lionagi", "demo", "--backend", backend],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=demo_env(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "\033[" not in done.stdout  # not a terminal: no color
    timeline = check_timeline(done.stdout)
    starts = [e for e in timeline if e.text.startswith("RunStart ")]
    assert len(starts) == 6
    assert not any(e.text.startswith("RunFailed") for e in timeline)

    # 1. the three callers all called before any of their turns after the first one started,
    # and their turns ran one after another in arrival order
    position = {e.text: i for i, e in enumerate(timeline)}
    queued = [position[f"caller {name} calls chat_and_record"] for name in "ABC"]
    caller_turns = [e for e in starts if e.text.startswith("RunStart chat_and_record")]
    assert [e.text[-10:] for e in caller_turns] == ["(caller A)", "(caller B)", "(caller C)"]
    assert max(queued) < timeline.index(caller_turns[1])

    # 2. operate ran the tool inside its turn
    operate = next(e for e in starts if e.text.startswith("RunStart operate"))
    in_operate = [e.text for e in timeline if e.turn == operate.turn]
    assert "MessageAdded action_request multiply(a=6, b=7)" in in_operate
    assert "MessageAdded action_response multiply -> 42" in in_operate

    # 3. each streamed message was handed out after its MessageAdded
    received = [e for e in timeline if e.text.startswith("caller E received ")]
    assert [e.text.split()[3] for e in received] == [
        "instruction",
        "action_request",
        "action_response",
        "assistant",
    ]
    for event in received:
        added = "MessageAdded " + event.text.removeprefix("caller E received ")
        assert position[added] < timeline.index(event)

    # 4. the CANCEL line is followed by the RunEnd of that turn; the late directive is refused
    [cancel] = [e for e in timeline if e.text.startswith("control CANCEL -> True")]
    after = [e for e in timeline[timeline.index(cancel) :] if e.turn == cancel.turn]
    terminal = next(e for e in after if TERMINAL.match(e.text))
    assert terminal.text.startswith("RunEnd run (caller F)")
    stale = [e for e in timeline if "after the turn ended -> False" in e.text]
    assert [e.turn for e in stale] == [cancel.turn]
    assert timeline.index(stale[0]) > timeline.index(terminal)

    assert done.stdout.splitlines()[-1] == f"summary: 6 turns, 19 messages, backend {backend}"


def sse_text(*pieces: str) -> Reply:
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in pieces]
    return Reply(events=[*events, chunk({}, finish="stop"), DONE])


def sse_tool_call(a: int, b: int, *, preface: str = "", hang: bool = False) -> Reply:
    call = {
        "index": 0,
        "id": f"call_{a}_{b}",
        "type": "function",
        "function": {"name": "multiply", "arguments": f'{{"a": {a}, "b": {b}}}'},
    }
    events = [chunk({"content": preface})] if preface else []
    events.append(chunk({"tool_calls": [call]}))
    tail = [AWAIT_CLOSE] if hang else [chunk({}, finish="tool_calls"), DONE]
    return Reply(events=[*events, *tail])


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_demo_talks_to_a_real_openai_compatible_server(
    backend: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-demo-test")
    tool_reply = completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_op",
                    "type": "function",
                    "function": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'},
                }
            ],
        },
        finish="tool_calls",
    )
    with ScriptedServer() as server:
        server.reply(
            *(Reply(json=completion({"role": "assistant", "content": "Noted."})) for _ in "ABC"),
            Reply(json=tool_reply),
            Reply(json=completion({"role": "assistant", "content": "42"})),
            sse_tool_call(12, 12),
            sse_text("12 x 12 ", "= 144."),
            sse_tool_call(7, 8, preface="Thinking aloud.", hang=True),
        )
        code = main(
            [
                "demo",
                "--backend",
                backend,
                "--provider",
                "openai",
                "--model",
                "gpt-demo",
                "--base-url",
                f"{server.url}/v1",
                "--no-color",
            ]
        )
        requests = len(server.requests)
    out = capsys.readouterr().out
    assert code == 0
    assert requests == 8
    timeline = check_timeline(out)
    texts = [e.text for e in timeline]
    assert 'caller D got "42" (1 tool call)' in texts
    assert 'caller E received assistant "12 x 12 = 144."' in texts
    assert "control CANCEL -> True (observer, on MessageAdded)" in texts
    assert out.splitlines()[-1] == f"summary: 6 turns, 19 messages, backend {backend}"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_provider_error_is_one_line(
    backend: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-demo-test")
    refused = Reply(status=401, json={"error": {"message": "invalid api key"}})
    with ScriptedServer() as server:
        server.reply(*[refused] * 3)
        args = ["demo", "--backend", backend, "--provider", "openai", "--model", "gpt-demo"]
        code = main([*args, "--base-url", f"{server.url}/v1", "--no-color"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1, err
    assert err.startswith("demo failed: AuthenticationError: ")
    assert "invalid api key" in err


def test_version_and_help_name_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"lionagi {lionagi.__version__}\n"
    with pytest.raises(SystemExit):
        main(["--help"])
    assert capsys.readouterr().out.startswith("usage: lionagi ")


def test_command_line_errors() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--provider", "openai"])
    assert exited.value.code == 2
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--backend", "curio"])
    assert exited.value.code == 2
    assert main([]) == 2
