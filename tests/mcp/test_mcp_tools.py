"""MCP tools against a real MCP server the test starts, over stdio and streamable HTTP."""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Literal

import anyio
import pytest
from pydantic import SecretStr

from lionagi.errors import (
    ActionError,
    ConfigurationError,
    DuplicateToolError,
    McpError,
    ToolArgumentError,
    ToolTimeoutError,
)
from lionagi.mcp import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TOOL_TIMEOUT, McpServer, McpTool
from lionagi.protocols.messages import ActionResponse, ToolCall
from lionagi.session.branch import Branch
from lionagi.testing import TestModel
from tests.mcp.servers import SERVER, MakeServer, Probe
from tests.processes import assert_gone


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"function": name, "arguments": arguments}


# -- listing and calling ---------------------------------------------------------------------
async def test_list_tools_gives_the_server_schemas(make_server: MakeServer) -> None:
    async with make_server() as server:
        tools = {t.name: t for t in await server.list_tools()}
    assert {"add", "echo", "lookup", "fail", "block", "crash", "pid"} <= set(tools)
    add = tools["add"]
    assert isinstance(add, McpTool)
    assert add.remote_name == "add"
    assert add.description == "Add two integers."
    assert add.schema["function"]["name"] == "add"
    params = add.parameters
    assert params["required"] == ["a", "b"]
    assert params["properties"]["a"]["type"] == "integer"


async def test_calls_go_through_act_and_return_server_results(make_server: MakeServer) -> None:
    branch = Branch()
    async with make_server() as server:
        loaded = await branch.load_mcp_tools(server)
        assert set(branch.tools.names) == {t.name for t in loaded}
        responses = await branch.act(
            [call("add", a=2, b=40), call("lookup", key="abc"), call("echo", text="hi", times=2)]
        )
    assert [r.output for r in responses] == [
        {"result": 42},
        {"key": "abc", "length": 3},
        {"result": "hi hi"},
    ]
    assert not any(r.is_error for r in responses)
    recorded = [m for m in branch.msgs if isinstance(m, ActionResponse)]
    assert [m.function for m in recorded] == ["add", "lookup", "echo"]


@pytest.mark.parametrize("transport", ["stdio"])  # checked on our side
async def test_prefix_and_names_select_and_rename(make_server: MakeServer) -> None:
    branch = Branch()
    async with make_server() as server:
        await branch.load_mcp_tools(server, names={"add": "plus"}, prefix="calc_")
        assert branch.tools.names == ("calc_plus",)
        [response] = await branch.act([call("calc_plus", a=1, b=2)])
        assert response.output == {"result": 3}
        with pytest.raises(McpError, match="no tool 'missing'"):
            await server.list_tools(names=["add", "missing"])


@pytest.mark.parametrize("transport", ["stdio"])  # checked on our side
async def test_loading_options_reach_the_server_and_unknown_ones_are_refused(
    make_server: MakeServer,
) -> None:
    branch = Branch()
    async with make_server() as server:
        with pytest.raises(TypeError, match="unexpected keyword argument 'prefixes' "):
            await branch.load_mcp_tools(server, prefixes="x_")  # type: ignore[call-arg]
        assert not branch.tools.names
        [first] = await branch.load_mcp_tools(server, names=["add"], follow_changes=False)
        with pytest.raises(DuplicateToolError):
            await branch.load_mcp_tools(server, names=["add"], follow_changes=False)
        [again] = await branch.load_mcp_tools(
            server, names=["add"], update=True, follow_changes=False
        )
        assert branch.tools.names == ("add",)
        assert branch.tools.get("add") is again is not first


@pytest.mark.parametrize("transport", ["stdio"])  # checked on our side
async def test_invalid_arguments_are_rejected_before_the_call(make_server: MakeServer) -> None:
    async with make_server() as server:
        tools = {t.name: t for t in await server.list_tools()}
        with pytest.raises(ToolArgumentError, match="'b': a required value is missing"):
            await tools["add"].call({"a": 1})
        with pytest.raises(ToolArgumentError, match="'a'") as info:
            await tools["add"].call({"a": "one", "b": 2})
        assert "'one' is not of type 'integer'" in str(info.value)
        with pytest.raises(ToolArgumentError, match="named arguments"):
            await tools["add"].call([1, 2])  # type: ignore[arg-type]
        assert await tools["add"].call({"a": 1, "b": 2}) == {"result": 3}


async def test_tool_error_becomes_an_error_response(make_server: MakeServer) -> None:
    branch = Branch()
    async with make_server() as server:
        await branch.load_mcp_tools(server)
        [response] = await branch.act([call("fail", reason="no")])
        assert response.is_error
        assert isinstance(response.output, dict)
        assert "ActionError" in str(response.output["error"])
        assert "'fail'" in str(response.output["error"])
        with pytest.raises(ActionError, match="reported an error"):
            await branch.act([call("fail", reason="no")], suppress_errors=False)
        # the server is still fine
        [ok] = await branch.act([call("add", a=1, b=1)])
        assert ok.output == {"result": 2}


# -- time limits and cancellation -------------------------------------------------------------
async def test_timeout_cancels_the_request_at_the_server(
    make_server: MakeServer, probe: Probe
) -> None:
    async with make_server(timeout=0.5) as server:
        tools = {t.name: t for t in await server.list_tools()}
        with pytest.raises(ToolTimeoutError, match="'block'"):
            await tools["block"].call({"probe": probe.address})
        connection = await probe.accept()
        await connection.started()
        assert await connection.line() == "cancelled"
        assert await tools["add"].call({"a": 2, "b": 3}) == {"result": 5}


async def test_cancel_mid_call_cancels_the_request(make_server: MakeServer, probe: Probe) -> None:
    branch = Branch()
    async with make_server() as server:
        await branch.load_mcp_tools(server)
        finished = False
        async with anyio.create_task_group() as tg:

            async def act() -> None:
                nonlocal finished
                await branch.act([call("block", probe=probe.address)])
                finished = True

            tg.start_soon(act)
            connection = await probe.accept()
            await connection.started()
            tg.cancel_scope.cancel()
        assert not finished
        assert await connection.line() == "cancelled"
        [ok] = await branch.act([call("add", a=2, b=2)])
        assert ok.output == {"result": 4}


# -- a server that goes away -------------------------------------------------------------------
async def test_crash_mid_call_fails_the_call_and_later_calls(
    make_server: MakeServer, probe: Probe, transport: str
) -> None:
    branch = Branch()
    async with make_server() as server:
        await branch.load_mcp_tools(server)
        with pytest.raises(McpError, match="closed the connection"):
            await branch.act([call("crash", probe=probe.address)], suppress_errors=False)
        pid = await (await probe.accept()).started()
        [later] = await branch.act([call("add", a=1, b=2)])
        assert later.is_error
        assert "McpError" in str(later.output)
    if transport == "stdio":  # the HTTP server is the fixture's child, reaped by it
        assert_gone(pid)


async def test_killed_server_fails_the_calls_in_flight(
    make_server: MakeServer, probe: Probe, transport: str
) -> None:
    branch = Branch()
    outcomes: list[ActionResponse] = []
    async with make_server() as server:
        await branch.load_mcp_tools(server)
        async with anyio.create_task_group() as tg:

            async def act() -> None:
                outcomes.extend(
                    await branch.act(
                        [call("block", probe=probe.address), call("block", probe=probe.address)]
                    )
                )

            tg.start_soon(act)
            pid = await (await probe.accept()).started()
            assert await (await probe.accept()).started() == pid
            os.kill(pid, signal.SIGKILL)
    assert len(outcomes) == 2
    assert all(o.is_error and "McpError" in str(o.output) for o in outcomes)
    if transport == "stdio":
        assert_gone(pid)


async def test_stdio_server_is_stopped_when_the_block_ends() -> None:
    async with McpServer.stdio(sys.executable, [str(SERVER)]) as server:
        tools = {t.name: t for t in await server.list_tools()}
        pid = await tools["pid"].call({})
        assert isinstance(pid, dict)
        os.kill(pid["result"], 0)  # running
    assert_gone(pid["result"])
    with pytest.raises(McpError, match="not connected"):
        await tools["pid"].call({})


async def test_cancel_while_connecting_leaves_no_server(tmp_path: object) -> None:
    server = McpServer.stdio(sys.executable, [str(SERVER)])
    with anyio.CancelScope() as scope:
        scope.cancel()
        async with server:
            pytest.fail("entered a cancelled scope")  # pragma: no cover
    assert not server.connected


# -- bad servers -------------------------------------------------------------------------------
async def test_a_server_that_cannot_start_is_mcp_error() -> None:
    with pytest.raises(McpError, match="cannot start MCP server"):
        async with McpServer.stdio("no-such-mcp-server-binary-here"):
            pass  # pragma: no cover
    with pytest.raises(McpError, match=r"handshake|closed"):
        async with McpServer.stdio(sys.executable, ["-c", "pass"], name="quits"):
            pass  # pragma: no cover


async def test_a_server_that_never_answers_times_out() -> None:
    silent = McpServer.stdio(
        sys.executable, ["-c", "import time; time.sleep(3600)"], connect_timeout=0.5
    )
    with pytest.raises(McpError, match=r"did not finish starting within 0\.5s"):
        async with silent:
            pass  # pragma: no cover
    assert not silent.connected


async def test_http_server_not_listening_is_mcp_error() -> None:
    with pytest.raises(McpError):
        async with McpServer.http("http://127.0.0.1:9/mcp", connect_timeout=5):
            pass  # pragma: no cover


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="URL"):
        McpServer.http("localhost:8000")
    with pytest.raises(ConfigurationError, match="timeout"):
        McpServer.stdio("server", timeout=0)
    with pytest.raises(ConfigurationError, match="args"):
        McpServer.stdio("server", "--flag")
    with pytest.raises(ConfigurationError, match="connect_timeout"):
        McpServer.http("http://127.0.0.1:1/mcp", connect_timeout=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected keyword argument 'time_out' "):
        McpServer.stdio("server", time_out=5)  # type: ignore[call-arg]


def test_time_limits_default_and_pass_through_both_constructors() -> None:
    default = McpServer.stdio("server")
    assert (default.timeout, default.connect_timeout) == (
        DEFAULT_TOOL_TIMEOUT,
        DEFAULT_CONNECT_TIMEOUT,
    )
    over_http = McpServer.http("http://127.0.0.1:1/mcp", timeout=None, connect_timeout=2.5)
    assert (over_http.timeout, over_http.connect_timeout) == (None, 2.5)
    assert over_http.name == "http://127.0.0.1:1/mcp"


def test_headers_are_secret() -> None:
    server = McpServer.http("http://127.0.0.1:1/mcp", headers={"Authorization": "Bearer s3cr3t"})
    assert "s3cr3t" not in repr(server)
    assert "s3cr3t" not in repr(vars(server) if hasattr(server, "__dict__") else server)


# -- HTTP headers ------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", ["http"])
async def test_headers_reach_the_server_with_every_call(make_server: MakeServer) -> None:
    branch = Branch()
    headers = {"Authorization": "Bearer s3cr3t", "X-Test-Tenant": SecretStr("acme")}
    async with make_server(headers=headers) as server:
        await branch.load_mcp_tools(server, names=["headers"])
        first, second = await branch.act([call("headers"), call("headers")])
    assert (
        first.output == second.output == {"authorization": "Bearer s3cr3t", "x-test-tenant": "acme"}
    )


@pytest.mark.parametrize("transport", ["http"])
async def test_without_headers_none_are_added(make_server: MakeServer) -> None:
    async with make_server() as server:
        assert await server.call_tool("headers", {}) == {}


# -- the server's tools change ------------------------------------------------------------------
# The SDK's pre-2026 streamable HTTP client leaves its response streams to the garbage
# collector on trio (a ResourceWarning on every connection, with or without tool changes), so
# the earlier protocols are checked over stdio.
@pytest.mark.parametrize(
    ("transport", "protocol"), [("stdio", "auto"), ("http", "auto"), ("stdio", "legacy")]
)
async def test_the_registry_follows_tools_the_server_adds_and_removes(
    make_server: MakeServer, protocol: Literal["auto", "legacy"]
) -> None:
    """``auto`` negotiates protocol 2026-07-28 (a ``subscriptions/listen`` stream), ``legacy``
    the earlier ones (``notifications/tools/list_changed``)."""
    branch = Branch()
    server = make_server()
    server._protocol_mode = protocol
    async with server:
        await branch.load_mcp_tools(server)
        assert "double" not in branch.tools
        version = server.tools_version
        await branch.act(call("grow", tool="double"))
        version = await server.wait_for_tools(version)
        assert isinstance(branch.tools["double"], McpTool)
        doubled = await branch.act(call("double", x=21))
        assert doubled.output == {"result": 42}
        await branch.act(call("shrink", tool="double"))
        await server.wait_for_tools(version)
        assert "double" not in branch.tools
        assert "add" in branch.tools


@pytest.mark.parametrize("transport", ["stdio"])  # the registry rules are ours
async def test_only_following_registries_change_and_never_anothers_tool(
    make_server: MakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    def double(x: int) -> int:
        """A tool of the Branch's own."""
        return -x

    selected, prefixed, fixed, own = Branch(), Branch(), Branch(), Branch(tools=[double])
    async with make_server() as server:
        await selected.load_mcp_tools(server, names=["add", "grow"])
        await prefixed.load_mcp_tools(server, prefix="s_")
        await fixed.load_mcp_tools(server, follow_changes=False)
        await own.load_mcp_tools(server)
        before = {b: b.tools.names for b in (selected, prefixed, fixed, own)}
        version = server.tools_version
        with caplog.at_level(logging.WARNING, logger="lionagi.mcp"):
            await selected.act(call("grow", tool="double"))
            await server.wait_for_tools(version)
        assert selected.tools.names == before[selected]  # only the tools it named
        assert prefixed.tools.names == (*before[prefixed], "s_double")
        assert fixed.tools.names == before[fixed]  # not following
        assert own.tools.names == before[own]
        assert own.tools["double"].func is double  # its own tool is kept
        assert "already registered from elsewhere" in caplog.text
        doubled = await prefixed.act(call("s_double", x=4))
        assert doubled.output == {"result": 8}


async def test_a_followed_branch_is_not_kept_alive_by_the_server(make_server: MakeServer) -> None:
    import gc
    import weakref

    async with make_server() as server:
        branch = Branch()
        await branch.load_mcp_tools(server)
        gone = weakref.ref(branch)
        del branch
        gc.collect()
        assert gone() is None
        version = server.tools_version
        probe = Branch()
        await probe.load_mcp_tools(server)
        await probe.act(call("grow", tool="double"))
        await server.wait_for_tools(version)
        assert "double" in probe.tools


# -- operations end to end ---------------------------------------------------------------------
async def test_operate_uses_mcp_tools(make_server: MakeServer) -> None:
    model = TestModel(
        [
            ToolCall(id="c1", name="add", arguments={"a": 20, "b": 22}),
            '{"answer": "42"}',
        ]
    )
    branch = Branch(chat_model=model)
    async with make_server() as server:
        await branch.load_mcp_tools(server, names=["add"])
        result = await branch.operate(instruction="add 20 and 22", actions=True)
    responses = [m for m in branch.msgs if isinstance(m, ActionResponse)]
    assert [r.output for r in responses] == [{"result": 42}]
    first = model.calls[0]
    assert [t.name for t in first.tools] == ["add"]
    assert result is not None


async def test_react_uses_mcp_tools(make_server: MakeServer) -> None:
    import json

    def analysis(text: str, *, more: bool) -> str:
        return json.dumps({"analysis": text, "extension_needed": more})

    model = TestModel(
        [
            ToolCall(id="c1", name="lookup", arguments={"key": "lion"}),
            analysis("looked up", more=True),
            analysis("done", more=False),
            "the key has 4 letters",
        ]
    )
    branch = Branch(chat_model=model)
    async with make_server() as server:
        await branch.load_mcp_tools(server)
        answer, analyses = await branch.ReAct("how long is lion?", return_analysis=True)
    assert answer == "the key has 4 letters"
    assert analyses[0].action_responses[0].output == {"key": "lion", "length": 4}
    third = model.calls[2]
    assert any(
        isinstance(m, ActionResponse) and m.output == {"key": "lion", "length": 4}
        for m in third.messages
    )
