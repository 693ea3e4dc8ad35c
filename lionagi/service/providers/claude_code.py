"""Agentic CLI provider: runs Claude Code (``claude -p``) as a subprocess and reads its events.

The CLI runs its own tool loop; we only send the prompt and translate its
``--output-format stream-json`` lines (one JSON object per line) into stream chunks. The child
process is always terminated and reaped when the stream ends, fails, is closed or cancelled.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import anyio
import anyio.lowlevel
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import Instruction, System, Usage
from lionagi.service.errors import ProtocolError, ServerError
from lionagi.service.providers.base import Provider
from lionagi.service.types import (
    FinalChunk,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    ToolResultEvent,
    UsageChunk,
)

__all__ = ["ClaudeCodeProvider"]

_POSIX = sys.platform != "win32"
_STDERR_TAIL = 2000


@dataclass
class _Run:
    """What one CLI run has told us so far."""

    session_id: str | None = None
    model: str | None = None
    tool_index: int = 0
    result: dict[str, Any] | None = None


class ClaudeCodeProvider(Provider):
    """Claude Code's non-interactive mode as a model: one CLI run per request.

    The prompt is the text of the last :class:`Instruction`; ``request.session_id`` resumes a
    CLI session (``--resume``), which is how a conversation continues. Without a session the
    CLI sees only that prompt, not earlier turns. A :class:`System` message is passed as
    ``--append-system-prompt`` (keeping the CLI's own agent prompt) unless resuming; the
    ``system_prompt`` setting replaces the CLI's prompt (``--system-prompt``) on every run.
    An ``api_key``, when given, reaches the child as ``ANTHROPIC_API_KEY``.

    Settings: ``executable`` (name or argument list, default ``"claude"``, looked up on
    ``PATH`` when a call starts), ``cwd``, ``permission_mode``, ``allowed_tools``,
    ``disallowed_tools``, ``system_prompt``, ``max_turns``, ``extra_args`` (placed before the
    prompt) and ``env`` (merged over ``os.environ``; left out of :meth:`config` since it may
    hold secrets). Request options such as ``temperature`` do not apply and are ignored.
    """

    name = "claude_code"
    api_key_env = None
    supports_native_tools = False
    setting_names = (
        "executable",
        "cwd",
        "permission_mode",
        "allowed_tools",
        "disallowed_tools",
        "system_prompt",
        "max_turns",
        "extra_args",
        "env",
    )

    #: seconds between SIGTERM and SIGKILL when a run is stopped early
    terminate_grace: float = 2.0
    #: longest accepted event line; a longer one is a ``ProtocolError``
    max_line_bytes: int = 16 * 1024 * 1024

    def __init__(self, *, model: str, **kwargs: Any) -> None:
        super().__init__(model=model, **kwargs)
        s = self.settings
        unknown = sorted(set(s) - set(self.setting_names))
        if unknown:
            raise ConfigurationError(
                f"claude_code does not accept {', '.join(map(repr, unknown))}; "
                f"its settings are {', '.join(self.setting_names)}"
            )
        self.executable: tuple[str, ...] = _executable(s.get("executable", "claude"))
        cwd = s.get("cwd")
        if cwd is not None and not isinstance(cwd, str | os.PathLike):
            raise ConfigurationError(f"cwd must be a path or None, got {cwd!r}")
        self.cwd: str | None = None if cwd is None else os.fspath(cwd)
        if self.cwd is not None:
            s["cwd"] = self.cwd  # keep config() JSON-friendly
        self.permission_mode: str | None = _opt_str("permission_mode", s.get("permission_mode"))
        self.allowed_tools = _tool_list("allowed_tools", s.get("allowed_tools"))
        self.disallowed_tools = _tool_list("disallowed_tools", s.get("disallowed_tools"))
        self.system_prompt: str | None = _opt_str("system_prompt", s.get("system_prompt"))
        max_turns = s.get("max_turns")
        if max_turns is not None and (
            not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1
        ):
            raise ConfigurationError(f"max_turns must be a positive int or None, got {max_turns!r}")
        self.max_turns: int | None = max_turns
        self.extra_args: tuple[str, ...] = _str_seq("extra_args", s.get("extra_args", ()))
        env = s.get("env") or {}
        if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise ConfigurationError("env must be a mapping of str to str")
        self.env: dict[str, str] = dict(env)

    def config(self) -> dict[str, Any]:
        return {k: v for k, v in super().config().items() if k != "env"}

    # -- calls ---------------------------------------------------------------------------
    async def invoke(self, request: ModelRequest) -> ModelResponse:
        """Run the CLI to completion and return its result (tool calls already ran there)."""
        final: ModelResponse | None = None
        chunks = self.stream(request)
        try:
            async for chunk in chunks:
                if isinstance(chunk, FinalChunk):
                    final = chunk.response
        finally:
            with anyio.CancelScope(shield=True):
                await chunks.aclose()
        if final is None:  # stream() always ends with a FinalChunk or raises
            raise self._protocol("the run ended without a result")
        return final

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamChunk, None]:
        """Start the CLI and yield its events as chunks; the last one is a ``FinalChunk``."""
        argv = self.command(request)
        env = {**os.environ, **self.env}
        if self.api_key is not None:
            env["ANTHROPIC_API_KEY"] = self.api_key.get_secret_value()
        stderr = tempfile.TemporaryFile()  # noqa: SIM115  # closed in the finally below
        process: Process | None = None
        try:
            process = await self._spawn(argv, env, stderr)
            await anyio.lowlevel.checkpoint()
            assert process.stdout is not None
            lines = BufferedByteReceiveStream(process.stdout)
            run = _Run()
            while run.result is None:
                line = await self._read_line(lines)
                if line is None:
                    break
                event = self._parse(line)
                if event is None:
                    continue
                for chunk in self._translate(event, run):
                    yield chunk
            returncode = await process.wait()
            result = run.result
            if result is not None and (
                result.get("is_error") or result.get("subtype") != "success"
            ):
                kind = _str_or(result.get("subtype"), None) or "error"
                kind = "error" if kind == "success" else kind
                detail = result.get("result") or "no result text"
                raise self._server(
                    f"run failed ({kind}): {detail}",
                    returncode,
                    stderr,
                    run.session_id,
                )
            if returncode != 0:
                raise self._server(f"exited with code {returncode}", returncode, stderr, None)
            if result is None:
                raise self._protocol("the CLI exited without a result event" + self._tail(stderr))
            response = self._response(result, run)
            yield UsageChunk(usage=response.usage)
            yield FinalChunk(response=response)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    if process is not None:
                        await self._reap(process)
                finally:
                    stderr.close()

    # -- building the command ------------------------------------------------------------
    def command(self, request: ModelRequest) -> list[str]:
        """The argument list one run of ``request`` uses (the prompt is last, after ``--``)."""
        prompt = next(
            (m.render_text() for m in reversed(request.messages) if isinstance(m, Instruction)),
            None,
        )
        if prompt is None:
            raise ConfigurationError(
                "claude_code needs an Instruction message: its text is the prompt of the run"
            )
        argv = [*self._resolve(), "-p", "--output-format", "stream-json", "--verbose"]
        if request.model and request.model != "default":
            argv += ["--model", request.model]
        if request.session_id:
            argv += ["--resume", request.session_id]
        else:
            system = "\n\n".join(m.content for m in request.messages if isinstance(m, System))
            if system:
                argv += ["--append-system-prompt", system]
        if self.system_prompt is not None:
            argv += ["--system-prompt", self.system_prompt]
        if self.permission_mode is not None:
            argv += ["--permission-mode", self.permission_mode]
        if self.allowed_tools:
            argv += ["--allowedTools", ",".join(self.allowed_tools)]
        if self.disallowed_tools:
            argv += ["--disallowedTools", ",".join(self.disallowed_tools)]
        if self.max_turns is not None:
            argv += ["--max-turns", str(self.max_turns)]
        argv += [*self.extra_args, "--", prompt]
        return argv

    async def _spawn(self, argv: list[str], env: dict[str, str], stderr: IO[bytes]) -> Process:
        # Shielded so a cancellation cannot land between the spawn and our holding the handle.
        with anyio.CancelScope(shield=True):
            try:
                process = await anyio.open_process(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    cwd=self.cwd,
                    env=env,
                    start_new_session=_POSIX,
                )
            except OSError as exc:
                where = "" if self.cwd is None else f" in {self.cwd!r}"
                raise ConfigurationError(
                    f"cannot start {argv[0]!r}{where}: {exc}; check the claude_code "
                    "'executable' and 'cwd' settings"
                ) from exc
        return process

    def _resolve(self) -> list[str]:
        program, *rest = self.executable
        found = shutil.which(program)
        if found is None:
            raise ConfigurationError(
                f"claude_code executable {program!r} was not found on PATH; install Claude "
                "Code or pass executable='/path/to/claude' (or an argument list)"
            )
        return [found, *rest]

    # -- reading events ------------------------------------------------------------------
    async def _read_line(self, lines: BufferedByteReceiveStream) -> bytes | None:
        """The next line without its newline; ``None`` at end of output."""
        try:
            line = await lines.receive_until(b"\n", self.max_line_bytes)
        except anyio.IncompleteRead:
            pending = len(lines.buffer)  # a last line without a newline
            if not pending:
                return None
            line = await lines.receive(pending)
        except anyio.DelimiterNotFound:
            raise self._protocol(
                f"an event line is longer than {self.max_line_bytes} bytes"
            ) from None
        if len(line) > self.max_line_bytes:
            raise self._protocol(f"an event line is longer than {self.max_line_bytes} bytes")
        return line

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        text = line.decode("utf-8", errors="replace").strip()
        if not text:
            return None
        try:
            event = json.loads(text)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            raise self._protocol(
                f"the CLI printed a line that is not a JSON object: {text[:200]!r}"
            )
        return event

    def _translate(self, event: dict[str, Any], run: _Run) -> Iterator[StreamChunk]:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            run.session_id = _str_or(event.get("session_id"), run.session_id)
            run.model = _str_or(event.get("model"), run.model)
        elif kind == "assistant":
            for block in _content(event):
                if block.get("type") == "text" and block.get("text"):
                    yield TextDelta(text=str(block["text"]), complete=True)
                elif block.get("type") == "tool_use":
                    yield ToolCallDelta(
                        index=run.tool_index,
                        id=_str_or(block.get("id"), None),
                        name=_str_or(block.get("name"), None),
                        arguments=json.dumps(block.get("input") or {}, ensure_ascii=False),
                    )
                    run.tool_index += 1
        elif kind == "user":
            for block in _content(event):
                if block.get("type") == "tool_result":
                    yield ToolResultEvent(
                        call_id=str(block.get("tool_use_id", "")),
                        output=_tool_output(block.get("content")),
                        is_error=bool(block.get("is_error", False)),
                    )
        elif kind == "result":
            run.session_id = _str_or(event.get("session_id"), run.session_id)
            run.result = event

    def _response(self, result: dict[str, Any], run: _Run) -> ModelResponse:
        usage = result.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        cost = result.get("total_cost_usd")
        return ModelResponse(
            text=str(result.get("result") or ""),
            usage=Usage(
                input_tokens=_int(usage.get("input_tokens")),
                output_tokens=_int(usage.get("output_tokens")),
                cached_input_tokens=_int(usage.get("cache_read_input_tokens")),
                cache_write_tokens=_int(usage.get("cache_creation_input_tokens")),
                cost_usd=float(cost) if isinstance(cost, int | float) else None,
            ),
            model=run.model or self.model,
            provider=self.name,
            finish_reason=_str_or(result.get("subtype"), None),
            session_id=run.session_id,
            raw=result,
        )

    # -- ending the process --------------------------------------------------------------
    async def _reap(self, process: Process) -> None:
        """Stop the process group if still running, wait for the exit, close the pipes."""
        if process.returncode is None:
            _stop(process, force=False)
            with anyio.move_on_after(self.terminate_grace):
                await process.wait()
            if process.returncode is None:
                _stop(process, force=True)
            await process.wait()
        await process.aclose()

    # -- errors --------------------------------------------------------------------------
    def _tail(self, stderr: IO[bytes]) -> str:
        """The end of stderr with the API key masked: a CLI may echo its environment."""
        text = _tail(stderr)
        if self.api_key is not None:
            secret = self.api_key.get_secret_value()
            if secret:
                text = text.replace(secret, "***")
        return text

    def _protocol(self, message: str) -> ProtocolError:
        return ProtocolError(message, provider=self.name, model=self.model)

    def _server(
        self, message: str, returncode: int, stderr: IO[bytes], session_id: str | None
    ) -> ServerError:
        where = "" if session_id is None else f" (session {session_id})"
        return ServerError(
            f"{message}; exit code {returncode}{where}{self._tail(stderr)}",
            provider=self.name,
            model=self.model,
        )


def _stop(process: Process, *, force: bool) -> None:
    """SIGTERM (or SIGKILL when ``force``) the child's whole process group."""
    try:
        if _POSIX:  # the child leads its own session and process group
            os.killpg(process.pid, signal.SIGKILL if force else signal.SIGTERM)
        elif force:
            process.kill()
        else:
            process.terminate()
    except ProcessLookupError:
        pass


def _tail(stderr: IO[bytes]) -> str:
    """The end of the child's stderr, for error messages (empty when it printed nothing)."""
    fd = stderr.fileno()
    size = os.fstat(fd).st_size
    start = max(0, size - _STDERR_TAIL)
    if hasattr(os, "pread"):  # leaves the offset the child shares with us alone
        data = os.pread(fd, size - start, start)
    else:
        stderr.seek(start)
        data = stderr.read()
    text = data.decode("utf-8", errors="replace").strip()
    return f"; stderr: {text}" if text else ""


def _content(event: dict[str, Any]) -> list[dict[str, Any]]:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _tool_output(content: Any) -> Any:
    """A tool result's text; a list holding anything other than text blocks is kept as is."""
    if isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "text" for b in content
    ):
        return "\n".join(str(b.get("text", "")) for b in content)
    return content


def _str_or(value: Any, default: str | None) -> str | None:
    return value if isinstance(value, str) and value else default


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _opt_str(name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigurationError(f"{name} must be a string or None, got {value!r}")
    return value


def _str_seq(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigurationError(f"{name} must be a list of strings, got {value!r}")
    if not all(isinstance(v, str) for v in value):
        raise ConfigurationError(f"{name} must be a list of strings, got {value!r}")
    return tuple(value)


def _tool_list(name: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return _str_seq(name, value)


def _executable(value: Any) -> tuple[str, ...]:
    parts = (value,) if isinstance(value, str) else _str_seq("executable", value)
    if not parts or not parts[0]:
        raise ConfigurationError(
            f"executable must be a program name or a non-empty argument list, got {value!r}"
        )
    return parts
