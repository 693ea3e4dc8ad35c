"""MCP tool servers as a source of tools (needs the ``lionagi[mcp]`` extra).

An :class:`McpServer` is one connection to a Model Context Protocol server, spawned as a
subprocess speaking stdio (:meth:`McpServer.stdio`) or reached over streamable HTTP
(:meth:`McpServer.http`). Its lifetime is an ``async with`` block: entering starts or connects
to the server and runs the protocol handshake, leaving closes the session and stops the
subprocess. Inside the block :meth:`McpServer.list_tools` returns the server's tools as
:class:`McpTool` objects, ordinary :class:`~lionagi.protocols.tools.Tool` s, so they go through
the same registry, authorization, argument validation (against the server's JSON schema),
timeouts and error handling as Python tools::

    async with McpServer.stdio("python", ["my_server.py"]) as server:
        await branch.load_mcp_tools(server)
        await branch.ReAct(instruct={"instruction": "..."})

The client side is the official ``mcp`` SDK, which is built on anyio, so all of this works on
asyncio and trio. A server that crashes or closes the connection fails the calls in flight
(and every later call) with :class:`~lionagi.errors.McpError`; it never leaves a turn waiting.
Cancelling a tool call (a cancelled turn, a tool ``timeout``) cancels the MCP request: the SDK
sends the server ``notifications/cancelled``.

A server whose tools change tells its clients (``notifications/tools/list_changed``, or an
event on a ``subscriptions/listen`` stream on protocol 2026-07-28): the tools loaded with
:meth:`McpServer.load_tools` (``Branch.load_mcp_tools``) are then listed again and the
registry they were loaded into is brought up to date -- new tools added, changed ones
replaced, removed ones unregistered.
"""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

import anyio
from pydantic import BaseModel, ConfigDict, JsonValue, SecretStr, ValidationError, create_model

from lionagi._declared import unexpected_keywords
from lionagi.errors import ActionError, ConfigurationError, McpError, ToolArgumentError
from lionagi.protocols.tools import Tool, ToolRegistry

try:
    import jsonschema
    import mcp
    import mcp.types as mcp_types
    from mcp.client.streamable_http import streamable_http_client
    from mcp.client.subscriptions import ListenNotSupportedError
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("MCP tools need the 'mcp' extra: pip install 'lionagi[mcp]'") from exc

if TYPE_CHECKING:
    from mcp.client import Transport

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_TOOL_TIMEOUT",
    "McpServer",
    "McpTool",
    "ServerLimits",
    "ToolLoading",
]

#: seconds allowed for starting a server and the protocol handshake
DEFAULT_CONNECT_TIMEOUT = 30.0
#: seconds allowed for one tool call, unless the server or tool says otherwise
DEFAULT_TOOL_TIMEOUT = 300.0
_log = logging.getLogger("lionagi.mcp")
_CONNECTION_CLOSED = -32000  # JSON-RPC error code the SDK uses for a closed connection
_LIST_PAGE_CAP = 1000  # a server whose tool listing never ends cannot hang list_tools


class ServerLimits(TypedDict, total=False):
    """The time limits of an :class:`McpServer`, which :meth:`McpServer.stdio` and
    :meth:`McpServer.http` take."""

    #: seconds for each tool call of the tools it lists, None for none (default
    #: :data:`DEFAULT_TOOL_TIMEOUT`)
    timeout: float | None
    #: seconds for starting the server plus the handshake, and for each listing of its tools
    #: (default :data:`DEFAULT_CONNECT_TIMEOUT`)
    connect_timeout: float


_SERVER_LIMITS = ServerLimits.__optional_keys__


class ToolLoading(TypedDict, total=False):
    """How :meth:`McpServer.load_tools` (and ``Branch.load_mcp_tools``, which passes them on)
    loads a server's tools into a registry."""

    #: put before every local name, to keep two servers' tools apart (default ``""``)
    prefix: str
    #: keep only the listed tools; a mapping also renames them, ``{remote: local}`` (default:
    #: every tool)
    names: Sequence[str] | Mapping[str, str] | None
    #: replace registered tools of the same name instead of refusing them (default False)
    update: bool
    #: keep the registry in step with the server's tool changes (default True)
    follow_changes: bool


_TOOL_LOADING = ToolLoading.__optional_keys__


class McpServer:
    """One MCP server connection; use it as ``async with server: ...``.

    Build it with :meth:`stdio` or :meth:`http`. ``name`` labels errors and logs (default:
    the command or URL). ``timeout`` (seconds, ``None`` for none) bounds each tool call of the
    tools it lists; ``connect_timeout`` bounds starting the server plus the handshake, and each
    tool listing. An instance may be entered again after it was left, never twice at once.
    """

    #: the SDK's connect mode: "auto" negotiates the newest protocol both sides speak;
    #: "legacy" forces the pre-2026 initialize handshake (the tests use it on one instance)
    _protocol_mode: Literal["auto", "legacy"] = "auto"

    def __init__(self, transport: _TransportSpec, name: str, limits: ServerLimits) -> None:
        if not _SERVER_LIMITS.issuperset(limits):
            raise unexpected_keywords("McpServer", limits, _SERVER_LIMITS)
        timeout = limits.get("timeout", DEFAULT_TOOL_TIMEOUT)
        connect_timeout = limits.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
        _check_timeout("timeout", timeout, optional=True)
        _check_timeout("connect_timeout", connect_timeout, optional=False)
        self._spec = transport
        self.name = name
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._client: mcp.Client | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._closing = anyio.Event()
        self._broken: McpError | None = None
        self._inflight: set[anyio.CancelScope] = set()
        # following the server's tool changes (see load_tools)
        self._watchers: anyio.abc.TaskGroup | None = None
        self._listening = False
        self._stale = anyio.Event()
        self._follows: list[_Follow] = []
        self._tools_version = 0
        self._relisted = anyio.Event()

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        **limits: Unpack[ServerLimits],
    ) -> McpServer:
        """A server run as a subprocess (``command`` plus ``args``, never through a shell).

        The child gets a minimal environment (``PATH``, ``HOME`` and the like) plus ``env``;
        it runs in its own process group, which is stopped when the ``async with`` ends.
        """
        spec = _TransportSpec(stdio=_stdio_parameters(command, args, env, cwd))
        return cls(spec, name or command, limits)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str | SecretStr] | None = None,
        name: str | None = None,
        **limits: Unpack[ServerLimits],
    ) -> McpServer:
        """A server reached over streamable HTTP at ``url`` (such as ``http://host/mcp``).

        ``headers`` (an ``Authorization`` header, say) are sent with every request and are
        held as secrets: they never appear in ``repr`` or error messages.
        """
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"McpServer.http needs an absolute http(s) URL such as "
                f"'http://127.0.0.1:8000/mcp', got {url!r}"
            )
        secret_headers = {
            k: v if isinstance(v, SecretStr) else SecretStr(v) for k, v in (headers or {}).items()
        }
        return cls(_TransportSpec(url=url, headers=secret_headers), name or url, limits)

    def __repr__(self) -> str:
        state = "connected" if self._client is not None else "closed"
        return f"McpServer(name={self.name!r}, {state})"

    # -- lifetime ----------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        """Inside the ``async with`` block, with the session alive."""
        return self._client is not None

    async def __aenter__(self) -> McpServer:
        """Start (stdio) or reach (HTTP) the server and run the handshake.

        Raises :class:`McpError` when the server cannot be started or reached, or does not
        finish the handshake within ``connect_timeout``. Cancellation while connecting stops
        the subprocess before it propagates.

        The session runs in a task of its own, so a transport that fails (a server that
        crashed, a dropped HTTP connection) ends that task only: the calls in flight then fail
        with :class:`McpError` and the code inside the block goes on."""
        if self._tg is not None:
            raise McpError(f"MCP server {self.name!r} is already connected; leave it first")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._broken = None
        self._closing = anyio.Event()
        failure: list[Exception] = []
        try:
            self._client = await tg.start(self._serve, failure)
        except BaseException as exc:  # cancelled while connecting
            self._tg = None
            await tg.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        if self._client is None:  # _serve has returned: the task group is done
            self._tg = None
            await tg.__aexit__(None, None, None)
            error = failure[0]
            if isinstance(error, McpError):
                raise error
            raise self._connect_failure(error) from error
        return self

    async def _serve(
        self,
        failure: list[Exception],
        *,
        task_status: anyio.abc.TaskStatus[mcp.Client | None],
    ) -> None:
        """The session's own task: connect, report the client, hold it until the block ends.

        A failure to connect is handed to ``__aenter__`` (reported as no client); a failure
        after the handshake is recorded and ends the calls in flight, never the caller's
        block. This task raises nothing but cancellation."""
        connected = False
        try:
            async with AsyncExitStack() as stack:
                with anyio.CancelScope(
                    deadline=anyio.current_time() + self.connect_timeout
                ) as deadline:
                    client = mcp.Client(
                        self._spec.transport(stack),
                        raise_exceptions=False,
                        message_handler=self._on_message,
                        mode=self._protocol_mode,
                    )
                    async with client, anyio.create_task_group() as watchers:
                        deadline.deadline = math.inf
                        connected = True
                        self._watchers = watchers
                        watchers.start_soon(self._relist_when_stale)
                        task_status.started(client)
                        await self._closing.wait()
                        watchers.cancel_scope.cancel()
                if deadline.cancelled_caught and not connected:
                    raise McpError(
                        f"MCP server {self.name!r} did not finish starting within "
                        f"{self.connect_timeout:g}s; check that it speaks MCP, or raise "
                        "connect_timeout"
                    )
        except Exception as exc:
            if connected:
                self._break(exc)
            else:
                failure.append(_unwrap(exc))
                task_status.started(None)
        else:
            if not self._closing.is_set():  # the session ended by itself
                self._break(None)

    def _break(self, exc: Exception | None) -> None:
        self._broken = McpError(
            f"MCP server {self.name!r} closed the connection (it crashed or exited)"
            + ("" if exc is None else f": {_describe(exc)}")
            + "; leave and re-enter the 'async with' block to restart it"
        )
        self._client = None
        for scope in self._inflight:
            scope.cancel()
        if exc is not None:
            _log.warning("MCP server %r failed", self.name, exc_info=exc)

    def _connect_failure(self, exc: Exception) -> McpError:
        if isinstance(exc, MCPError):
            return McpError(f"MCP server {self.name!r} failed the handshake: {exc.message}")
        if isinstance(exc, OSError | ValueError):
            return McpError(f"cannot start MCP server {self.name!r}: {exc}")
        return McpError(f"cannot connect to MCP server {self.name!r}: {_describe(exc)}")

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the session; a stdio server gets its stdin closed, then SIGTERM, then SIGKILL
        (the SDK's shutdown sequence, shielded and bounded), and is reaped."""
        tg, self._tg, self._client = self._tg, None, None
        if tg is None:
            return
        self._closing.set()
        try:
            await tg.__aexit__(exc_type, exc, tb)
        finally:
            self._watchers = None
            self._listening = False
            self._follows.clear()
            self._stale = anyio.Event()

    # -- tools -----------------------------------------------------------------------------
    async def list_tools(
        self,
        *,
        prefix: str = "",
        names: Sequence[str] | Mapping[str, str] | None = None,
    ) -> tuple[McpTool, ...]:
        """The server's tools as :class:`McpTool` objects, in the server's order.

        ``names`` keeps only the listed tools (a mapping also renames them: ``{remote:
        local}``); ``prefix`` is put before every local name (to keep two servers' tools
        apart). Raises :class:`McpError` when a listed name is not offered by the server.
        Checkpoints; cancel-safe (nothing is registered anywhere)."""
        listed = await self._listed()
        wanted = _wanted(names)
        if wanted is not None:
            offered = {t.name for t in listed}
            missing = [n for n in wanted if n not in offered]
            if missing:
                raise McpError(
                    f"MCP server {self.name!r} offers no tool {', '.join(map(repr, missing))}; "
                    f"it offers: {', '.join(sorted(offered)) or '(none)'}"
                )
        return self._tools_of(listed, prefix, wanted)

    async def load_tools(
        self, registry: ToolRegistry, **loading: Unpack[ToolLoading]
    ) -> tuple[McpTool, ...]:
        """List the server's tools (as :meth:`list_tools`) and register them in ``registry``,
        all or none (``update=True`` replaces tools of the same name); ``loading`` is the
        :class:`ToolLoading` options.

        With ``follow_changes`` (the default) the registry follows the server while the
        ``async with`` block lasts: when the server says its tools changed they are listed
        again, new ones registered, changed ones replaced and removed ones unregistered (a
        tool of the same name registered from elsewhere is left alone, with a warning in
        the ``"lionagi.mcp"`` log). The server keeps only a weak reference to the registry.
        Checkpoints; cancel-safe (a cancelled listing registers nothing)."""
        if not _TOOL_LOADING.issuperset(loading):
            raise unexpected_keywords("load_tools", loading, _TOOL_LOADING)
        prefix, names = loading.get("prefix", ""), loading.get("names")
        follow_changes = loading.get("follow_changes", True)
        if follow_changes:
            await self._listen_for_changes()  # first, so no change after the listing is missed
        tools = await self.list_tools(prefix=prefix, names=names)
        registry.register_many(tools, update=loading.get("update", False))
        if follow_changes:
            self._follows.append(_Follow(registry, prefix, _wanted(names), tools))
        return tools

    @property
    def tools_version(self) -> int:
        """How many times the tools were listed again after the server said they changed
        (during this ``async with`` block and earlier ones)."""
        return self._tools_version

    async def wait_for_tools(self, version: int) -> int:
        """Wait until :attr:`tools_version` is past ``version`` (a value read earlier): the
        followed registries are then up to date with the change. Returns the new version.
        Checkpoints; cancel-safe."""
        while self._tools_version <= version:
            await self._relisted.wait()
        return self._tools_version

    async def _listed(self) -> list[mcp_types.Tool]:
        """Every tool the server lists (all pages)."""
        client = self._require()
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        try:
            for _ in range(_LIST_PAGE_CAP):
                with anyio.fail_after(self.connect_timeout):
                    page = await client.list_tools(cursor=cursor)
                listed.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except TimeoutError:
            raise McpError(
                f"MCP server {self.name!r} did not list its tools within {self.connect_timeout:g}s"
            ) from None
        except Exception as exc:
            raise self._failure("listing tools", exc) from exc
        return listed

    def _tools_of(
        self, listed: Sequence[mcp_types.Tool], prefix: str, wanted: Mapping[str, str] | None
    ) -> tuple[McpTool, ...]:
        return tuple(
            McpTool(self, t, name=prefix + (t.name if wanted is None else wanted[t.name]))
            for t in listed
            if wanted is None or t.name in wanted
        )

    # -- following tool changes ------------------------------------------------------------
    async def _on_message(self, message: Any) -> None:
        """The SDK's message handler: a tools list-changed notification (sent by the server,
        or teed from a ``subscriptions/listen`` event) marks the tools stale."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._stale.set()
        await anyio.lowlevel.checkpoint()

    async def _listen_for_changes(self) -> None:
        """On protocol 2026-07-28 change events come only on a ``subscriptions/listen``
        stream: open one (once per connection) and wait for the server's acknowledgment, so
        no change after this returns is missed. Earlier protocols notify without asking."""
        client, watchers = self._client, self._watchers
        if self._listening or client is None or watchers is None:
            return
        tools = client.server_capabilities.tools
        if tools is None or not tools.list_changed:
            return
        self._listening = True
        with anyio.move_on_after(self.connect_timeout) as waited:
            await watchers.start(self._listen, client)
        if waited.cancelled_caught:
            _log.info(
                "MCP server %r did not acknowledge a tool-change subscription within %gs; "
                "not following its tool changes",
                self.name,
                self.connect_timeout,
            )

    async def _listen(self, client: mcp.Client, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Hold the listen stream; its events reach :meth:`_on_message` through the SDK.
        Raises nothing but cancellation (a failure here must not end the session's task)."""
        started = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                task_status.started()
                started = True
                async for _ in subscription:
                    self._stale.set()
        except ListenNotSupportedError:
            pass  # an earlier protocol: the server notifies without a stream
        except Exception as exc:
            _log.info("MCP server %r: not following tool changes: %s", self.name, _describe(exc))
        finally:
            if not started:
                task_status.started()

    async def _relist_when_stale(self) -> None:
        """The session's watcher: list the tools again each time they went stale and update
        every followed registry. Raises nothing but cancellation."""
        while True:
            await self._stale.wait()
            self._stale = anyio.Event()
            self._follows = [f for f in self._follows if f.registry() is not None]
            if self._follows:
                try:
                    listed = await self._listed()
                except McpError as exc:
                    _log.warning("MCP server %r: could not list changed tools: %s", self.name, exc)
                    continue
                for follow in self._follows:
                    self._apply(follow, listed)
            self._tools_version += 1
            self._relisted.set()
            self._relisted = anyio.Event()

    def _apply(self, follow: _Follow, listed: Sequence[mcp_types.Tool]) -> None:
        registry = follow.registry()
        if registry is None:
            return
        fresh = {tool.name: tool for tool in self._tools_of(listed, follow.prefix, follow.wanted)}
        for name, old in follow.tools.items():  # gone: unregister what is still this server's
            if name not in fresh and _held(registry, name) is old:
                registry.remove(name)
        follow.tools = {
            name: tool for name, tool in fresh.items() if self._replace(registry, follow, tool)
        }

    def _replace(self, registry: ToolRegistry, follow: _Follow, tool: McpTool) -> bool:
        """Register ``tool`` unless its name holds a tool from elsewhere (then warn)."""
        held = _held(registry, tool.name)
        if held is not None and held is not follow.tools.get(tool.name):
            _log.warning(
                "MCP server %r offers a new tool %r, but a tool of that name is already "
                "registered from elsewhere; keeping that one",
                self.name,
                tool.name,
            )
            return False
        registry.register(tool, update=True)
        return True

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> JsonValue:
        """Call the server's tool ``name`` and return its result as JSON data.

        The result is the tool's structured content when it sent one, else its text (several
        text blocks joined by newlines), else its content blocks as JSON objects. A tool that
        reports an error raises :class:`~lionagi.errors.ActionError` with its message; a
        protocol error, a crashed server or a closed connection raises :class:`McpError`.
        No timeout of its own (an :class:`McpTool` applies its ``timeout``); cancel-safe:
        cancellation cancels the MCP request at the server."""
        client = self._require()
        with anyio.CancelScope() as scope:  # cancelled when the session breaks
            self._inflight.add(scope)
            try:
                result = await client.call_tool(name, dict(arguments))
            except Exception as exc:
                raise self._failure(f"calling tool {name!r}", exc) from exc
            finally:
                self._inflight.discard(scope)
        if scope.cancelled_caught:
            raise self._require_failure()
        if result.is_error:
            raise ActionError(
                f"tool {name!r} on MCP server {self.name!r} reported an error: "
                f"{_text(result.content) or 'no message'}"
            )
        return _output(result)

    # -- helpers -----------------------------------------------------------------------------
    def _require(self) -> mcp.Client:
        if self._broken is not None:
            raise self._require_failure()
        if self._client is None:
            raise McpError(
                f"MCP server {self.name!r} is not connected; use its tools inside "
                f"'async with server:'"
            )
        return self._client

    def _require_failure(self) -> McpError:
        broken = self._broken or McpError(f"MCP server {self.name!r} closed the connection")
        return McpError(str(broken))

    def _failure(self, doing: str, exc: Exception) -> McpError:
        if self._broken is not None:
            return self._require_failure()
        if isinstance(exc, MCPError):
            if exc.code == _CONNECTION_CLOSED:
                return McpError(
                    f"MCP server {self.name!r} closed the connection while {doing} (it "
                    "crashed or exited); leave and re-enter the 'async with' block to restart it"
                )
            return McpError(f"MCP server {self.name!r} refused {doing}: {exc.message}")
        if isinstance(exc, ValidationError):
            return McpError(f"MCP server {self.name!r} sent a malformed reply to {doing}: {exc}")
        return McpError(f"MCP server {self.name!r} failed {doing}: {_describe(exc)}")


class _Follow:
    """A registry that follows the server's tools: how they were selected, and the tools of
    this server it holds."""

    __slots__ = ("prefix", "registry", "tools", "wanted")

    def __init__(
        self,
        registry: ToolRegistry,
        prefix: str,
        wanted: Mapping[str, str] | None,
        tools: Sequence[McpTool],
    ) -> None:
        self.registry = weakref.ref(registry)
        self.prefix = prefix
        self.wanted = wanted
        self.tools = {tool.name: tool for tool in tools}


def _held(registry: ToolRegistry, name: str) -> Tool | None:
    """The tool registered as ``name``, or None (``ToolRegistry.get`` raises instead)."""
    return registry[name] if name in registry else None  # noqa: SIM401


def _wanted(names: Sequence[str] | Mapping[str, str] | None) -> Mapping[str, str] | None:
    """``names`` as ``{remote: local}`` (None: every tool under its own name)."""
    if names is None:
        return None
    if isinstance(names, Mapping):
        return dict(names)
    return {n: n for n in names}


class McpTool(Tool):
    """A tool offered by an MCP server. Calls go to the server while it is connected.

    ``parameters`` is the server's input schema and arguments are validated against it (JSON
    Schema) before the call; ``remote_name`` is the server's name for the tool, ``name`` the
    one models see. ``timeout`` comes from the server's ``timeout`` setting.
    """

    __slots__ = ("_server", "_validator", "output_schema", "remote_name")

    def __init__(self, server: McpServer, spec: mcp_types.Tool, *, name: str) -> None:
        # Tool's constructor reads a Python signature; an MCP tool brings its own schema.
        Tool(_placeholder, name=name)  # checks the name exactly as for any tool
        self.name = name
        schema = dict(spec.input_schema or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        try:
            validator_cls = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator
            )
            validator_cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise McpError(
                f"MCP server {server.name!r} gave tool {spec.name!r} an invalid input schema: "
                f"{exc.message}"
            ) from None
        self._validator: Any = validator_cls(schema)
        self._server = server
        self.remote_name: str = spec.name
        self.output_schema: dict[str, Any] | None = spec.output_schema
        self.func = self._call_remote
        self.description = spec.description or spec.title or ""
        self.timeout = server.timeout
        self.is_async = True
        self._parameters = schema
        self._arguments = _OPEN_ARGUMENTS
        self._fields = {}
        self._positional = ()
        self._pass_always = frozenset()

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check ``arguments`` against the server's JSON schema; raise
        :class:`ToolArgumentError` naming the first failing field."""
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(
                self.name,
                "(arguments)",
                f"expected an object of named arguments, got {type(arguments).__name__}",
            )
        values = dict(arguments)
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(values))
        if error is None:
            return values
        path, message = self._explain(error)
        raise ToolArgumentError(self.name, ".".join(path) or "(arguments)", message)

    def _explain(self, error: jsonschema.ValidationError) -> tuple[list[str], str]:
        """The failing field's path and what is wrong with it, in the words a model reads."""
        path = [str(p) for p in error.absolute_path]
        if not isinstance(error.instance, Mapping):
            return path, error.message
        if error.validator == "required":
            required: list[str] = error.validator_value  # type: ignore[assignment]
            missing = [p for p in required if p not in error.instance]
            return [*path, *missing[:1]], "a required value is missing"
        if error.validator == "additionalProperties":
            known = self._parameters.get("properties", {})
            extra = [k for k in error.instance if k not in known]
            allowed = ", ".join(known) or "none"
            return [*path, *extra[:1]], f"unexpected argument; this tool accepts: {allowed}"
        return path, error.message

    async def _run(self, values: dict[str, Any]) -> Any:
        return await self._server.call_tool(self.remote_name, values)

    async def _call_remote(self, **arguments: Any) -> JsonValue:
        return await self._server.call_tool(self.remote_name, arguments)

    @property
    def server(self) -> McpServer:
        return self._server

    def __repr__(self) -> str:
        return (
            f"McpTool(name={self.name!r}, server={self._server.name!r}, timeout={self.timeout!r})"
        )


def _stdio_parameters(
    command: str, args: Sequence[str], env: Mapping[str, str] | None, cwd: str | None
) -> mcp.StdioServerParameters:
    """The SDK's parameters for a stdio server, after checking each argument's type."""
    if not isinstance(command, str) or not command:
        raise ConfigurationError(f"McpServer.stdio needs a command, got {command!r}")
    if isinstance(args, str) or not _all_text(args):
        raise ConfigurationError(f"McpServer.stdio args must be a list of strings, got {args!r}")
    if env is not None and not (_all_text(env) and _all_text(env.values())):
        raise ConfigurationError("McpServer.stdio env must be a mapping of str to str")
    return mcp.StdioServerParameters(
        command=command, args=list(args), env=None if env is None else dict(env), cwd=cwd
    )


def _all_text(values: Iterable[Any]) -> bool:
    return all(isinstance(value, str) for value in values)


class _TransportSpec:
    """How to reach a server; builds a fresh SDK transport for each connection."""

    __slots__ = ("headers", "stdio", "url")

    def __init__(
        self,
        *,
        stdio: mcp.StdioServerParameters | None = None,
        url: str | None = None,
        headers: Mapping[str, SecretStr] | None = None,
    ) -> None:
        self.stdio = stdio
        self.url = url
        self.headers = dict(headers or {})

    def transport(self, stack: AsyncExitStack) -> mcp.StdioServerParameters | Transport | str:
        if self.stdio is not None:
            return self.stdio
        assert self.url is not None
        if not self.headers:
            return self.url
        import httpx2  # the SDK's HTTP client, installed with it

        client = httpx2.AsyncClient(
            headers={k: v.get_secret_value() for k, v in self.headers.items()},
            timeout=httpx2.Timeout(30.0, read=300.0),
        )
        stack.push_async_callback(client.aclose)
        return streamable_http_client(self.url, http_client=client)

    def __repr__(self) -> str:
        return f"_TransportSpec(url={self.url!r}, stdio={self.stdio is not None})"


def _placeholder() -> None:
    """Stands in for an MCP tool's function while its name is checked."""


_OPEN_ARGUMENTS: type[BaseModel] = create_model(
    "mcp_arguments", __config__=ConfigDict(extra="allow")
)


def _text(content: Sequence[Any]) -> str:
    return "\n".join(str(b.text) for b in content if getattr(b, "type", None) == "text")


def _output(result: mcp_types.CallToolResult) -> JsonValue:
    if result.structured_content is not None:
        structured: JsonValue = result.structured_content
        return structured
    content = list(result.content)
    if all(getattr(b, "type", None) == "text" for b in content):
        return _text(content)
    return [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in content]


def _unwrap(exc: Exception) -> Exception:
    """The one exception inside the (nested) exception groups the SDK's task groups raise."""
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: Exception) -> str:
    """``Type: message`` of ``exc``, looking inside exception groups."""
    exc = _unwrap(exc)
    return f"{type(exc).__name__}: {exc}"


def _check_timeout(label: str, value: Any, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(
            f"McpServer {label} must be a positive number of seconds"
            f"{' or None' if optional else ''}, got {value!r}"
        )
