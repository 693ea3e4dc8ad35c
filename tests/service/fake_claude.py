"""A stand-in for ``claude -p ... --output-format stream-json --verbose`` used by the tests.

It accepts the same arguments and prints real-shaped JSON lines. ``FAKE_CLAUDE_MODE`` picks the
behaviour (see ``MODES``); when ``FAKE_CLAUDE_PID_FILE`` is set, the modes that keep running
write their PID (and their grandchild's) there before printing anything.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

SESSION = "fake-session-1"


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="claude", add_help=False)
    parser.add_argument("-p", "--print", action="store_true")
    parser.add_argument("--output-format", default="text")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--model")
    parser.add_argument("-r", "--resume")
    parser.add_argument("--system-prompt")
    parser.add_argument("--append-system-prompt")
    parser.add_argument("--permission-mode")
    parser.add_argument("--allowedTools")
    parser.add_argument("--disallowedTools")
    parser.add_argument("--max-turns", type=int)
    parser.add_argument("--add-dir", action="append")
    parser.add_argument("prompt", nargs="?")
    return parser.parse_known_args(argv)


def emit(event: dict[str, Any] | str, end: str = "\n") -> None:
    line = event if isinstance(event, str) else json.dumps(event)
    sys.stdout.write(line + end)
    sys.stdout.flush()


def init(args: argparse.Namespace) -> str:
    session = args.resume or SESSION
    emit(
        {
            "type": "system",
            "subtype": "init",
            "session_id": session,
            "model": f"claude-{args.model or 'default'}-fake",
            "cwd": os.getcwd(),
            "tools": ["Read", "Bash"],
        }
    )
    return session


def assistant(*blocks: dict[str, Any]) -> None:
    emit(
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": list(blocks),
                "usage": {"input_tokens": 3, "output_tokens": 2},
            },
            "session_id": SESSION,
        }
    )


def result(session: str, text: str, *, error: str | None = None, end: str = "\n") -> None:
    emit(
        {
            "type": "result",
            "subtype": error or "success",
            "is_error": error is not None,
            "result": text,
            "session_id": session,
            "total_cost_usd": 0.0125,
            "num_turns": 1,
            "duration_ms": 12,
            "usage": {
                "input_tokens": 11,
                "output_tokens": 7,
                "cache_read_input_tokens": 5,
                "cache_creation_input_tokens": 3,
            },
        },
        end=end,
    )


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def write_pids(*pids: int) -> None:
    path = os.environ.get("FAKE_CLAUDE_PID_FILE")
    if path:
        with open(path + ".tmp", "w") as f:
            f.write("\n".join(map(str, pids)))
        os.replace(path + ".tmp", path)


def sleep_forever() -> None:
    while True:
        time.sleep(3600)


def main() -> int:
    args, extra = parse(sys.argv[1:])
    if args.output_format == "stream-json" and not args.verbose:
        sys.stderr.write("Error: --output-format=stream-json requires --verbose\n")
        return 1
    mode = os.environ.get("FAKE_CLAUDE_MODE", "normal")

    if mode == "fail":
        sys.stderr.write("Error: Invalid API key · Please run /login\n")
        return 1

    if mode == "hang":
        # The grandchild shares our process group. On SIGTERM we wait for it before exiting, so
        # once we have been reaped it is gone too -- provided the whole group was signalled.
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
        init(args)
        assistant(text("working"))
        sleep_forever()

    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        write_pids(os.getpid())
        init(args)
        assistant(text("working"))
        sleep_forever()

    session = init(args)
    if mode in ("normal", "unterminated"):
        emit("")
        emit({"type": "rate_limit_event", "info": {"status": "allowed"}})
        assistant(text("Hello from the fake CLI."))
        end = "" if mode == "unterminated" else "\n"
        result(session, "Hello from the fake CLI.", end=end)
        return 0
    if mode == "tools":
        assistant(
            text("Let me look."),
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.txt"}},
            {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "false"}},
        )
        emit(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": [text("line one"), text("line two")],
                        },
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_2",
                            "content": "exit status 1",
                            "is_error": True,
                        },
                    ],
                },
            }
        )
        assistant(text("Done."))
        result(session, "Done.")
        return 0
    if mode == "error_result":
        result(session, "", error="error_max_turns")
        return 1
    if mode == "garbage":
        emit("this is not json {")
        return 0
    if mode == "no_result":
        assistant(text("partial"))
        return 0
    if mode == "long_line":
        assistant(text("x" * 5000))
        result(session, "x")
        return 0
    if mode == "echo":
        received = {
            "prompt": args.prompt,
            "model": args.model,
            "resume": args.resume,
            "system_prompt": args.system_prompt,
            "append_system_prompt": args.append_system_prompt,
            "permission_mode": args.permission_mode,
            "allowed_tools": args.allowedTools,
            "disallowed_tools": args.disallowedTools,
            "max_turns": args.max_turns,
            "add_dir": args.add_dir,
            "extra": extra,
            "cwd": os.getcwd(),
            "api_key": os.environ.get("ANTHROPIC_API_KEY"),
            "marker": os.environ.get("FAKE_CLAUDE_MARKER"),
        }
        result(session, json.dumps(received))
        return 0
    sys.stderr.write(f"fake_claude: unknown FAKE_CLAUDE_MODE {mode!r}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
