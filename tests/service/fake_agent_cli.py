"""A stand-in for ``codex exec --json`` and ``gemini --output-format stream-json``.

Run as ``fake_agent_cli.py exec ...`` it speaks Codex's JSON lines; otherwise Gemini CLI's.
``FAKE_CLI_MODE`` picks the behaviour (normal, tools, fail, error_result, garbage, no_result,
hang, stubborn, echo); when ``FAKE_CLI_PID_FILE`` is set, the modes that keep running write
their PID (and their grandchild's) there before printing anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any


def emit(event: dict[str, Any] | str) -> None:
    sys.stdout.write((event if isinstance(event, str) else json.dumps(event)) + "\n")
    sys.stdout.flush()


def write_pids(*pids: int) -> None:
    path = os.environ.get("FAKE_CLI_PID_FILE")
    if path:
        with open(path + ".tmp", "w") as f:
            f.write("\n".join(map(str, pids)))
        os.replace(path + ".tmp", path)


def sleep_forever() -> None:
    while True:
        time.sleep(3600)


def parse(argv: list[str]) -> dict[str, Any]:
    """The options both fakes understand, the prompt, and whatever else was passed."""
    args: dict[str, Any] = {"extra": [], "prompt": None, "model": None, "resume": None}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            args["prompt"] = argv[i + 1] if i + 1 < len(argv) else ""
            break
        if arg.startswith("--prompt="):
            args["prompt"] = arg[len("--prompt=") :]
        elif arg in ("--model", "--sandbox", "--approval-mode", "--output-format", "--resume"):
            args[arg[2:].replace("-", "_")] = argv[i + 1]
            i += 1
        elif arg == "resume":
            args["resume"] = argv[i + 1]
            i += 1
        elif arg in ("--json", "exec"):
            pass
        else:
            args["extra"].append(arg)
        i += 1
    return args


class Codex:
    def start(self, args: dict[str, Any]) -> None:
        emit({"type": "thread.started", "thread_id": args["resume"] or "thread-1"})
        emit({"type": "turn.started"})

    def say(self, text: str, n: int = 0) -> None:
        emit(
            {
                "type": "item.completed",
                "item": {"id": f"item_{n}", "type": "agent_message", "text": text},
            }
        )

    def finish(self) -> None:
        emit(
            {
                "type": "turn.completed",
                "usage": {"input_tokens": 11, "cached_input_tokens": 4, "output_tokens": 7},
            }
        )

    def tools(self) -> None:
        emit(
            {
                "type": "item.completed",
                "item": {"id": "item_0", "type": "reasoning", "text": "Look first."},
            }
        )
        command = {
            "id": "item_1",
            "type": "command_execution",
            "command": "ls",
            "aggregated_output": "",
            "status": "in_progress",
        }
        emit({"type": "item.started", "item": command})
        emit(
            {
                "type": "item.completed",
                "item": {
                    **command,
                    "aggregated_output": "a.txt\n",
                    "exit_code": 0,
                    "status": "completed",
                },
            }
        )
        failing = {
            "id": "item_2",
            "type": "command_execution",
            "command": "false",
            "aggregated_output": "",
            "exit_code": 1,
            "status": "failed",
        }
        emit({"type": "item.completed", "item": failing})
        self.say("Done.", 3)

    def error_result(self) -> None:
        emit({"type": "turn.failed", "error": {"message": "usage limit reached"}})


class Gemini:
    def start(self, args: dict[str, Any]) -> None:
        emit(
            {
                "type": "init",
                "timestamp": "2026-12-01T09:00:00Z",
                "session_id": args["resume"] or "gem-session-1",
                "model": args["model"] or "gemini-2.5-pro",
            }
        )
        emit({"type": "message", "role": "user", "content": args["prompt"]})

    def say(self, text: str, n: int = 0) -> None:
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            emit({"type": "message", "role": "assistant", "content": piece, "delta": True})

    def finish(self) -> None:
        emit(
            {
                "type": "result",
                "status": "success",
                "stats": {
                    "total_tokens": 18,
                    "input_tokens": 11,
                    "output_tokens": 7,
                    "cached": 4,
                    "duration_ms": 12,
                    "tool_calls": 0,
                },
            }
        )

    def tools(self) -> None:
        self.say("Let me look.")
        emit(
            {
                "type": "tool_use",
                "tool_name": "read_file",
                "tool_id": "t1",
                "parameters": {"path": "a.txt"},
            }
        )
        emit({"type": "tool_result", "tool_id": "t1", "status": "success", "output": "hello"})
        emit(
            {
                "type": "tool_use",
                "tool_name": "run_shell_command",
                "tool_id": "t2",
                "parameters": {"command": "false"},
            }
        )
        emit(
            {
                "type": "tool_result",
                "tool_id": "t2",
                "status": "error",
                "error": {"type": "shell", "message": "exit status 1"},
            }
        )
        self.say("Done.")

    def error_result(self) -> None:
        emit(
            {
                "type": "result",
                "status": "error",
                "error": {"type": "quota", "message": "usage limit reached"},
                "stats": {},
            }
        )


def main() -> int:
    argv = sys.argv[1:]
    cli: Codex | Gemini = Codex() if argv[:1] == ["exec"] else Gemini()
    args = parse(argv)
    mode = os.environ.get("FAKE_CLI_MODE", "normal")
    if mode == "fail":
        sys.stderr.write("Error: not logged in; run the login command\n")
        return 1
    if mode == "hang":
        grandchild = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )

        def on_term(signum: int, frame: object) -> None:
            os.waitpid(grandchild.pid, 0)
            os._exit(128 + signum)

        signal.signal(signal.SIGTERM, on_term)
        write_pids(os.getpid(), grandchild.pid)
        cli.start(args)
        cli.say("working")
        sleep_forever()
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        write_pids(os.getpid())
        cli.start(args)
        cli.say("working")
        sleep_forever()
    cli.start(args)
    if mode == "normal":
        cli.say("Hello from the fake CLI.")
        cli.finish()
        return 0
    if mode == "tools":
        cli.tools()
        cli.finish()
        return 0
    if mode == "error_result":
        cli.error_result()
        return 1
    if mode == "garbage":
        emit("this is not json {")
        return 0
    if mode == "no_result":
        cli.say("partial")
        return 0
    if mode == "echo":
        received = {
            **args,
            "cwd": os.getcwd(),
            "api_key": os.environ.get("CODEX_API_KEY") or os.environ.get("GEMINI_API_KEY"),
            "marker": os.environ.get("FAKE_CLI_MARKER"),
        }
        cli.say(json.dumps(received))
        cli.finish()
        return 0
    sys.stderr.write(f"fake_agent_cli: unknown FAKE_CLI_MODE {mode!r}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
