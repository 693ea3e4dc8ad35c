"""Long conversations: one Branch, thousands of sequential recorded turns.

Every turn is timed on its own. The median of the first 100 turns is compared with the median
of the last 100: a driver that re-renders or re-counts the whole history on every turn shows a
ratio that grows with the length. The model does no work that grows with the history (an async
function answering with constant usage), so what grows is the library's own.

Three paths, each one conversation per repeat:

- ``chat_and_record`` on that offline model;
- the library model call on a growing list (the floor of ``turn``);
- ``chat_and_record`` through the real OpenAI-compatible provider against a loopback server in
  another process (``benchmarks/_loopback_server.py``), so request rendering, JSON encoding and
  sending the history are included; the server only reads each body and answers.

Each turn is also timed in this process's CPU time (``time.process_time``), which the other
processes of a busy machine disturb far less than the wall clock; for the HTTP path it counts
the client's own work (rendering, encoding, sending) and not the server's reading.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import (
    PROMPT,
    SYSTEM,
    Config,
    backends,
    floor_turns,
    median,
    new_history,
    now,
    offline_model,
    settle,
    target,
    us,
)
from lionagi import Branch, iModel

WINDOW = 100
SERVER = Path(__file__).resolve().parent / "_loopback_server.py"
OPENAI = "chat_and_record, OpenAI provider on loopback"
CPU_PATH = f"{OPENAI} (client CPU time)"


CPU: dict[str, list[int]] = {}  # CPU time of each turn of the last conversation, by path


async def _turns(branch: Branch, turns: int, cpu: list[int] | None = None) -> list[int]:
    times = []
    for _ in range(turns):
        start, busy = now(), time.process_time_ns()
        await branch.chat_and_record(PROMPT)
        times.append(now() - start)
        if cpu is not None:
            cpu.append(time.process_time_ns() - busy)
    assert len(branch.msgs) == 1 + 2 * turns
    return times


async def _over_http(model: iModel, turns: int) -> list[int]:
    CPU[OPENAI] = cpu = list[int]()
    return await _turns(Branch(system=SYSTEM, chat_model=model), turns, cpu)


async def _ours(turns: int) -> list[int]:
    return await _turns(Branch(system=SYSTEM, chat_model=offline_model()), turns)


async def _floor(turns: int) -> list[int]:
    model = offline_model()
    history = new_history()
    times = []
    for _ in range(turns):
        start = now()
        await floor_turns(model, 1, history)
        times.append(now() - start)
    return times


def _http_model(port: int) -> iModel:
    return iModel("openai", "loopback", base_url=f"http://127.0.0.1:{port}/v1", api_key="unused")


async def _measure(
    turns: int, repeats: int, window: int, port: int
) -> dict[str, list[tuple[float, float]]]:
    await _ours(window)  # warm-up
    model = _http_model(port)
    await _turns(Branch(system=SYSTEM, chat_model=model), min(turns, 20))
    jobs = {
        "chat_and_record": _ours,
        "library model call": _floor,
        OPENAI: lambda n: _over_http(model, n),
    }
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in (*jobs, CPU_PATH)}
    try:
        for _ in range(repeats):
            for name, job in jobs.items():
                settle()
                times = await job(turns)
                out[name].append((median(times[:window]), median(times[-window:])))
            cpu = CPU[OPENAI]
            out[CPU_PATH].append((median(cpu[:window]), median(cpu[-window:])))
    finally:
        await model.aclose()
    return out


class _Server:
    """The loopback server's process: started, its port read, ended at the end of its input."""

    def __enter__(self) -> int:
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        return int(self.process.stdout.readline())

    def __exit__(self, *exc: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def run(config: Config) -> dict[str, Any]:
    turns = config.size(2000, 60)
    window = config.size(WINDOW, 10)
    repeats = config.size(3, 1)
    rows = []
    targets = []
    with _Server() as port:
        measured_all = {b.name: b.run(_measure, turns, repeats, window, port) for b in backends()}
    for backend_name, measured in measured_all.items():
        for name, pairs in measured.items():
            first = median([a for a, _ in pairs])
            last = median([b for _, b in pairs])
            ratio = median([b / a for a, b in pairs])
            rows.append(
                {
                    "backend": backend_name,
                    "path": name,
                    "turns": turns,
                    f"us_turns_1_{window}": us(first),
                    f"us_turns_{turns - window + 1}_{turns}": us(last),
                    "last_over_first": round(ratio, 2),
                }
            )
            label = f"turns {turns - window + 1}-{turns} / turns 1-{window}"
            if name == "chat_and_record":
                targets.append(
                    target(
                        f"{label} <= 2x ({backend_name})",
                        ratio,
                        2.0,
                        note=(
                            "The model does no O(history) work, and a request reads the "
                            "history in place (no copy of it per turn)."
                        ),
                    )
                )
            elif name in (OPENAI, CPU_PATH):
                clock = "" if name == OPENAI else ", client CPU time"
                targets.append(
                    target(
                        f"{label} through the OpenAI provider on loopback{clock} <= 1.5x "
                        f"({backend_name})",
                        ratio,
                        1.5,
                        note=(
                            "Each message is rendered and JSON-encoded once, on the first "
                            "request that carries it; a request renders only the messages "
                            "after the conversation's encoded prefix and splices the body "
                            "together; a request made from the Branch's history trusts the "
                            "prefix without comparing it (the history is append-only) and "
                            "reads the history in place (no list copy). What still grows with "
                            "the history: copying the encoded history into the body once (a "
                            "C-level copy), and sending and reading it over the socket "
                            "(kernel time counts in the client's CPU time). `python -m "
                            "benchmarks long_instructions` counts the client's instructions "
                            "early and late in the conversation."
                        ),
                    )
                )
    return {
        "title": "Long conversation",
        "description": (
            f"One Branch, {turns} sequential recorded turns ({2 * turns + 1} messages at the "
            f"end), every turn timed; median of the first {window} against the last {window}, "
            f"median over {repeats} conversations. The offline model answers with constant "
            "usage (no work of its own that grows with the history); the library model call "
            "appends to a plain list and calls that model on it; the OpenAI path sends every "
            "request over HTTP to a server process on 127.0.0.1 that reads the body and answers, "
            "timed on the wall clock and, in its own row, in the client's CPU time."
        ),
        "columns": [
            "backend",
            "path",
            "turns",
            f"us_turns_1_{window}",
            f"us_turns_{turns - window + 1}_{turns}",
            "last_over_first",
        ],
        "rows": rows,
        "targets": targets,
    }
