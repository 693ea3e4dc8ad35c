"""Resilience: the rate limiter's cost and fairness, and a batch through a flaky server.

1. Overhead: one ``invoke`` of the offline model with no policy, with the default retry
   policy, and with request and token limits that never bind. The difference is what the
   policies cost a call that needs none of them.
2. Fairness: 1,000 callers started together on one model limited to N requests per interval
   (real anyio time): service order against arrival order, the most requests in any window,
   and the spread of waits.
3. Batch: 500 conversations, 25 at a time, each one ``chat_and_record`` against a local
   OpenAI-compatible server that answers 10% of requests with 429 (half with Retry-After) and
   5% with 500, on a seeded schedule. With retries inside the model call every conversation
   completes with one user message. For comparison, the same batch with ``retry=None`` and the
   caller retrying failed turns itself.
"""

from __future__ import annotations

import bisect
import json
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio

from benchmarks._common import Config, Unrecorded, backends, now, quantile, reply, target, us
from lionagi import Branch, ProviderError, RetryPolicy, iModel
from lionagi.protocols.messages import Instruction, Message
from lionagi.testing import FunctionModel

PROMPT: list[Message] = [Instruction(instruction="hello there")]


# -- 1. overhead ----------------------------------------------------------------------------
async def _per_call(model: FunctionModel, calls: int) -> float:
    for _ in range(50):
        await model.invoke(PROMPT)
    best = []
    for _ in range(5):
        start = now()
        for _ in range(calls):
            await model.invoke(PROMPT)
        best.append((now() - start) / calls)
    return min(best)


async def _overhead(calls: int) -> list[dict[str, Any]]:
    variants = {
        "no policy": FunctionModel(reply, retry=None),
        "default retry": FunctionModel(reply),
        "retry + limit_requests": FunctionModel(reply, limit_requests=10**9),
        "retry + limit_requests + limit_tokens": FunctionModel(
            reply, limit_requests=10**9, limit_tokens=10**12
        ),
    }
    for model in variants.values():
        model.provider.calls = Unrecorded()
    floor = await _per_call(variants["no policy"], calls)
    rows = []
    for name, model in variants.items():
        per_call = floor if name == "no policy" else await _per_call(model, calls)
        rows.append(
            {
                "variant": name,
                "per_call_us": us(per_call),
                "added_us": us(per_call - floor),
                "ratio": round(per_call / floor, 2),
            }
        )
    return rows


# -- 2. fairness ----------------------------------------------------------------------------
class _AdmissionClock:
    """anyio's clock, remembering the last reading: the limiter reads it last when it admits a
    request, and the model function runs right after, with no scheduling point between."""

    def __init__(self) -> None:
        self.last = 0.0

    def now(self) -> float:
        self.last = anyio.current_time()
        return self.last

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


async def _fairness(callers: int, limit: int, interval: float) -> dict[str, Any]:
    served: list[tuple[int, float]] = []
    clock = _AdmissionClock()

    async def serve(messages: list[Message], **options: Any) -> str:
        last = messages[-1]
        assert isinstance(last, Instruction)
        served.append((int(last.instruction or ""), clock.last))  # the admission time
        return "ok"

    model = FunctionModel(serve, limit_requests=limit, interval=interval, clock=clock)
    model.provider.calls = Unrecorded()
    asked: dict[int, float] = {}

    async def caller(index: int) -> None:
        asked[index] = anyio.current_time()
        await model.invoke([Instruction(instruction=str(index))])

    start = anyio.current_time()
    async with anyio.create_task_group() as group:
        for index in range(callers):
            group.start_soon(caller, index)
            await anyio.lowlevel.checkpoint()  # arrival order = index order
    elapsed = anyio.current_time() - start
    order = [index for index, _ in served]
    times = sorted(at for _, at in served)
    most = max(bisect.bisect_left(times, t + interval) - i for i, t in enumerate(times))
    waits = [(at - asked[index]) * 1e9 for index, at in served]
    return {
        "callers": callers,
        "limit": f"{limit} per {interval:g}s",
        "elapsed_s": round(elapsed, 3),
        "ideal_s": round((callers - 1) // limit * interval, 3),
        "out_of_order": sum(1 for i, index in enumerate(order) if i != index),
        "max_in_window": most,
        "wait_p50_ms": round(quantile(waits, 0.5) / 1e6, 1),
        "wait_max_ms": round(max(waits) / 1e6, 1),
    }


# -- 3. batch through a flaky server --------------------------------------------------------
class _Flaky(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, seed: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.counts = {"200": 0, "429": 0, "500": 0}

    def outcome(self) -> str:
        with self.lock:
            roll = self.random.random()
            kind = "429" if roll < 0.10 else "500" if roll < 0.15 else "200"
            self.counts[kind] += 1
            return kind


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Flaky

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        kind = self.server.outcome()
        headers = {"content-type": "application/json"}
        if kind == "200":
            message = {"role": "assistant", "content": "fine, thanks"}
            usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            body: dict[str, Any] = {"id": "1", "model": "m", "choices": [choice], "usage": usage}
            status = 200
        else:
            status = int(kind)
            body = {"error": {"message": f"scheduled {kind}"}}
            if kind == "429" and self.server.random.random() < 0.5:
                headers["retry-after"] = "0.2"
        payload = json.dumps(body).encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def _flaky_server(seed: int) -> Iterator[_Flaky]:
    server = _Flaky(seed)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def _batch(conversations: int, parallel: int, inner_retry: bool) -> dict[str, Any]:
    with _flaky_server(seed=14) as server:
        host, port = server.server_address[:2]
        model = iModel(
            "openai",
            "m",
            base_url=f"http://{host!s}:{port}/v1",
            api_key="sk-local",
            retry=RetryPolicy(attempts=8) if inner_retry else None,
        )
        branches = [
            Branch(system="You answer briefly.", chat_model=model) for _ in range(conversations)
        ]
        completed = 0
        caller_retries = 0
        gate = anyio.Semaphore(parallel)

        async def converse(branch: Branch) -> None:
            nonlocal completed, caller_retries
            async with gate:
                for _ in range(20):  # the caller's own retries (only needed without inner ones)
                    try:
                        await branch.chat_and_record("How are you?")
                    except ProviderError:
                        caller_retries += 1
                        await anyio.sleep(0.05)
                        continue
                    completed += 1
                    return

        start = now()
        async with anyio.create_task_group() as group:
            for branch in branches:
                group.start_soon(converse, branch)
        elapsed = (now() - start) / 1e9
        await model.aclose()
        user_messages = [sum(isinstance(m, Instruction) for m in b.msgs) for b in branches]
        requests = sum(server.counts.values())
    return {
        "retries": "inside the model call" if inner_retry else "caller retries the turn",
        "completed": f"{completed}/{conversations}",
        "with_duplicate_user_messages": sum(1 for n in user_messages if n > 1),
        "user_messages": sum(user_messages),
        "requests": requests,
        "429s": server.counts["429"],
        "500s": server.counts["500"],
        "caller_retries": caller_retries,
        "elapsed_s": round(elapsed, 2),
    }


def overhead_scenario(config: Config) -> dict[str, Any]:
    calls = config.size(5000, 200)
    rows = [
        {"backend": backend.name, **row}
        for backend in backends()
        for row in backend.run(_overhead, calls)
    ]
    limiter_cost = max(r["added_us"] for r in rows if r["variant"] == "retry + limit_requests")
    return {
        "title": "Policy overhead per invoke",
        "description": (
            f"{calls} sequential invokes of the offline model per variant, best of 5 runs; "
            "added_us is the difference to the same model with retry=None and no limits. The "
            "limits never bind, so this is the bookkeeping a call pays."
        ),
        "columns": ["backend", "variant", "per_call_us", "added_us", "ratio"],
        "rows": rows,
        "targets": [
            target(
                "rate limiter + retry bookkeeping per call that never waits (us, worst backend)",
                limiter_cost,
                50.0,
                unit="us",
            )
        ],
    }


def fairness_scenario(config: Config) -> dict[str, Any]:
    callers = config.size(1000, 100)
    rows = [
        {"backend": backend.name, **backend.run(_fairness, callers, 100, 0.05)}
        for backend in backends()
    ]
    fair = all(r["out_of_order"] == 0 and r["max_in_window"] <= 100 for r in rows)
    return {
        "title": "Rate limiter fairness under load",
        "description": (
            f"{callers} callers started together on one model with limit_requests=100 per "
            "0.05 s of real time. out_of_order counts callers served out of arrival order; "
            "max_in_window is the most requests admitted in any 0.05 s window (admission "
            "times as the limiter read them); ideal_s is the time the limit itself imposes."
        ),
        "columns": [
            "backend",
            "callers",
            "limit",
            "elapsed_s",
            "ideal_s",
            "out_of_order",
            "max_in_window",
            "wait_p50_ms",
            "wait_max_ms",
        ],
        "rows": rows,
        "targets": [
            {
                "target": "limiter serves in arrival order and never exceeds its limit",
                "value": fair,
                "limit": True,
                "unit": "",
                "met": fair,
                "by": None,
                "note": "",
            }
        ],
    }


def batch_scenario(config: Config) -> dict[str, Any]:
    conversations = config.size(500, 50)
    rows = [
        {"backend": backend.name, **backend.run(_batch, conversations, 25, inner)}
        for backend in backends()
        for inner in (True, False)
    ]
    inner_rows = [r for r in rows if r["retries"] == "inside the model call"]
    clean = all(
        r["completed"] == f"{conversations}/{conversations}"
        and r["with_duplicate_user_messages"] == 0
        for r in inner_rows
    )
    return {
        "title": "Batch through a flaky server",
        "description": (
            f"{conversations} conversations, 25 at a time, one chat_and_record each, against a "
            "local OpenAI-compatible server answering 10% of requests 429 (half with "
            "Retry-After: 0.2) and 5% 500 on a seeded schedule. Inside: the model's "
            "RetryPolicy(attempts=8). Caller: retry=None and the caller re-runs a failed "
            "turn (up to 20 times, 50 ms apart)."
        ),
        "columns": [
            "backend",
            "retries",
            "completed",
            "with_duplicate_user_messages",
            "user_messages",
            "requests",
            "429s",
            "500s",
            "caller_retries",
            "elapsed_s",
        ],
        "rows": rows,
        "targets": [
            {
                "target": "flaky batch, retries inside the call: all complete, no duplicates",
                "value": clean,
                "limit": True,
                "unit": "",
                "met": clean,
                "by": None,
                "note": "",
            }
        ],
    }
