"""Stream-turn checks shared by the live-output tests: models on a scripted server, the
delta-against-commit check and the close-at-every-event sweep."""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio
import anyio.lowlevel
import anyio.to_thread

from lionagi import (
    ActionRequest,
    AssistantResponse,
    Branch,
    Message,
    MessageCommitted,
    StreamEvent,
    TextDeltaEvent,
    ToolCallDeltaEvent,
    TurnStream,
)
from lionagi.service.imodel import iModel
from lionagi.session.signal import RunEnd
from tests.helpers import assert_idle, assert_one_terminal_per_start, observed_branch
from tests.service.http_server import Reply, ScriptedServer


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def openai_model(server: ScriptedServer) -> iModel:
    """An OpenAI-compatible chat model talking to ``server``."""
    return iModel(
        "openai", "gpt-test", base_url=f"{server.url}/v1", api_key="sk-test", timeout=30.0
    )


def anthropic_model(server: ScriptedServer) -> iModel:
    """An Anthropic Messages model talking to ``server``."""
    return iModel("anthropic", "claude-test", base_url=server.url, api_key="sk-t", timeout=30)


def committed(events: list[StreamEvent]) -> list[Message]:
    """The messages a stream's events committed, in order."""
    return [e.message for e in events if isinstance(e, MessageCommitted)]


def check_deltas(events: list[StreamEvent], *, finished: bool = True) -> None:
    """Each committed reply is the concatenation of the text deltas before it; each committed
    tool call holds the JSON its argument deltas spell."""
    text: list[str] = []
    calls: dict[str, tuple[str | None, list[str]]] = {}
    by_index: dict[int, str] = {}
    for event in events:
        match event:
            case TextDeltaEvent(text=piece):
                assert piece
                text.append(piece)
            case ToolCallDeltaEvent(index=index, call_id=call_id, name=name, arguments=args):
                if call_id is not None:
                    by_index[index] = call_id
                    calls[call_id] = (name, [])
                calls[by_index[index]][1].append(args)
            case MessageCommitted(message=AssistantResponse(content=content)):
                assert "".join(text) == content
                text.clear()
            case MessageCommitted(message=ActionRequest() as request) if calls:
                name, pieces = calls.pop(request.call_id)
                assert name == request.function
                assert json.loads("".join(pieces) or "{}") == request.arguments
                by_index.clear()
    if finished:
        assert not text
        assert not calls


def kinds(events: list[StreamEvent]) -> list[str]:
    """Each event's class name; a committed message by its message's class."""
    out = []
    for event in events:
        if isinstance(event, MessageCommitted):
            out.append(type(event.message).__name__)
        else:
            out.append(type(event).__name__)
    return out


async def close_at_every_event(
    how: str,
    reply: Reply,
    make_model: Callable[[ScriptedServer], iModel],
    count: int,
    open_stream: Callable[[Branch], TurnStream[StreamEvent]] = lambda b: b.stream("go"),
    whole_after: int | None = 4,
) -> None:
    """Stop a stream turn after each of its first ``count`` events, against a server that
    waits for the client to hang up: the connection is closed and the history holds whole
    messages only: from event ``whole_after`` on the instruction and the text segment that
    ended when a tool call began, before it nothing."""
    for stop_after in range(1, count + 1):
        with ScriptedServer() as server:
            server.reply(reply)
            model = make_model(server)
            branch, rec, _ = observed_branch(chat_model=model, tools=[multiply])
            seen: list[StreamEvent] = []
            with anyio.CancelScope() as scope:
                async with open_stream(branch) as stream:
                    async for event in stream:
                        seen.append(event)
                        if len(seen) == stop_after:
                            if how == "aclose":
                                await stream.aclose()
                            else:
                                scope.cancel()
                                await anyio.lowlevel.checkpoint()
            assert len(seen) == stop_after
            closed = await anyio.to_thread.run_sync(server.client_closed.wait, 30.0)
            assert closed, f"connection left open after {stop_after} event(s)"
            await model.aclose()
            # whole messages only: the instruction is committed with the text segment that ended
            # when the call began, never the call (its argument deltas were cut); nothing at all
            # before that
            history = list(branch.msgs)
            assert history[: len(committed(seen))] == committed(seen)
            whole = whole_after is not None and stop_after >= whole_after
            assert [type(m).__name__ for m in history] == (
                ["Instruction", "AssistantResponse"] if whole else []
            )
            check_deltas(seen, finished=False)
            assert isinstance(rec.terminals()[0], RunEnd)
            assert_one_terminal_per_start(rec)
            assert_idle(branch)
