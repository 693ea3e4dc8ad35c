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
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, ConfigDict, JsonValue, SecretStr, ValidationError, create_model

from lionagi.errors import ActionError, ConfigurationError, McpError, ToolArgumentError
from lionagi.protocols.tools import Tool

try:
    import jsonschema
    import mcp
    import mcp.types as mcp_types
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("MCP tools need the 'mcp' extra: pip install 'lionagi[mcp]'") from exc

if TYPE_CHECKING:
    from mcp.client import Transport

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_TOOL_TIMEOUT", "McpServer", "McpTool"]

#: seconds allowed for starting a server and the protocol handshake
DEFAULT_CONNECT_TIMEOUT = 30.0
#: seconds allowed for one tool call, unless the server or tool says otherwise
DEFAULT_TOOL_TIMEOUT = 300.0
_log = logging.getLogger("lionagi.mcp")
_CONNECTION_CLOSED = -32000  # JSON-RPC error code the SDK uses for a closed connection
_LIST_PAGE_CAP = 1000  # a server whose tool listing never ends cannot hang list_tools


class McpServer:
    """One MCP server connection; use it as ``async with server: ...``.

    Build it with :meth:`stdio` or :meth:`http`. ``name`` labels errors and logs (default:
    the command or URL). ``timeout`` (seconds, ``None`` for none) bounds each tool call of the
    tools it lists; ``connect_timeout`` bounds starting the server plus the handshake, and each
    tool listing. An instance may be entered again after it was left, never twice at once.
    """

    def __init__(
        self,
        transport: _TransportSpec,
        *,
        name: str,
        timeout: float | None = DEFAULT_TOOL_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
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
        timeout: float | None = DEFAULT_TOOL_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> McpServer:
        """A server run as a subprocess (``command`` plus ``args``, never through a shell).

        The child gets a minimal environment (``PATH``, ``HOME`` and the like) plus ``env``;
        it runs in its own process group, which is stopped when the ``async with`` ends.
        """
        if not isinstance(command, str) or not command:
            raise ConfigurationError(f"McpServer.stdio needs a command, got {command!r}")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise ConfigurationError(
                f"McpServer.stdio args must be a list of strings, got {args!r}"
            )
        if env is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise ConfigurationError("McpServer.stdio env must be a mapping of str to str")
        params = mcp.StdioServerParameters(
            command=command, args=list(args), env=None if env is None else dict(env), cwd=cwd
        )
        return cls(
            _TransportSpec(stdio=params),
            name=name or command,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str | SecretStr] | None = None,
        name: str | None = None,
        timeout: float | None = DEFAULT_TOOL_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
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
        return cls(
            _TransportSpec(url=url, headers=secret_headers),
            name=name or url,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )

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
                    client = mcp.Client(self._spec.transport(stack), raise_exceptions=False)
                    async with client:
                        deadline.deadline = math.inf
                        connected = True
                        task_status.started(client)
                        await self._closing.wait()
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
        await tg.__aexit__(exc_type, exc, tb)

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
        wanted: Mapping[str, str] | None
        if names is None:
            wanted = None
        elif isinstance(names, Mapping):
            wanted = dict(names)
        else:
            wanted = {n: n for n in names}
        if wanted is not None:
            offered = {t.name for t in listed}
            missing = [n for n in wanted if n not in offered]
            if missing:
                raise McpError(
                    f"MCP server {self.name!r} offers no tool {', '.join(map(repr, missing))}; "
                    f"it offers: {', '.join(sorted(offered)) or '(none)'}"
                )
            listed = [t for t in listed if t.name in wanted]
        return tuple(
            McpTool(self, t, name=prefix + (t.name if wanted is None else wanted[t.name]))
            for t in listed
        )

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
        path = [str(p) for p in error.absolute_path]
        if error.validator == "required" and isinstance(error.instance, Mapping):
            missing = [p for p in error.validator_value if p not in error.instance]
            return self._bad([*path, *missing[:1]], "a required value is missing")
        if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
            known = self._parameters.get("properties", {})
            extra = [k for k in error.instance if k not in known]
            allowed = ", ".join(known) or "none"
            return self._bad(
                [*path, *extra[:1]], f"unexpected argument; this tool accepts: {allowed}"
            )
        return self._bad(path, error.message)

    def _bad(self, path: list[str], message: str) -> dict[str, Any]:
        raise ToolArgumentError(self.name, ".".join(path) or "(arguments)", message)

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
