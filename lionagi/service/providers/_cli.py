"""What every agentic-CLI provider shares: spawning the CLI, reading its JSON lines, reaping it.

An agentic CLI (Claude Code, Codex, Gemini CLI) runs its own tool loop and prints one JSON
event per line. A subclass says which argument list one request runs (:meth:`command`), how
an event maps to stream chunks (:meth:`_translate`) and how the finished run becomes a reply
(:meth:`_finish`). This base owns the process: it is started from an argument list (never a
shell), in its own process group, and that group is terminated and the child reaped whenever
the stream ends, fails, is closed or is cancelled: the provider modules of the three CLIs
hold only their settings, command lines and event readers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from abc import abstractmethod
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar

import anyio
import anyio.lowlevel
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import Instruction, System
from lionagi.service.errors import ProtocolError, ServerError
from lionagi.service.providers._cli_settings import CLISettings
from lionagi.service.providers.base import Provider
from lionagi.service.types import (
    FinalChunk,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    UsageChunk,
)

__all__ = ["CLIProvider", "CLIRun"]

_POSIX = sys.platform != "win32"
_STDERR_TAIL = 2000


@dataclass
class CLIRun:
    """What one CLI run has told us so far. ``done`` stops reading before end of output."""

    session_id: str | None = None
    model: str | None = None
    tool_index: int = 0
    result: dict[str, Any] | None = None
    done: bool = False
    texts: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


class CLIProvider(Provider):
    """An agentic CLI run as a subprocess per request; its JSON-lines events become chunks.

    Common settings: ``executable`` (name or argument list, looked up on ``PATH`` when a call
    starts), ``cwd``, ``extra_args`` and ``env`` (merged over ``os.environ``; left out of
    :meth:`config` since it may hold secrets). An ``api_key`` reaches the child as the
    environment variable named by :attr:`child_key_env`.
    """

    supports_native_tools = False
    #: the CLI runs its own tools: a repeated request may repeat their side effects
    idempotent = False
    #: the program run when no ``executable`` setting is given
    default_executable: ClassVar[str] = ""
    #: environment variable through which ``api_key`` reaches the child (``None``: not passed)
    child_key_env: ClassVar[str | None] = None
    #: the model that checks this provider's settings: its fields are the setting names, and
    #: each checked setting becomes an attribute of the provider
    settings_model: ClassVar[type[CLISettings]] = CLISettings
    setting_names: ClassVar[tuple[str, ...]] = tuple(CLISettings.model_fields)
    executable: tuple[str, ...]
    cwd: str | None
    extra_args: tuple[str, ...]
    env: dict[str, str]

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
                f"{self.name} does not accept {', '.join(map(repr, unknown))}; "
                f"its settings are {', '.join(self.setting_names)}"
            )
        checked = self.settings_model.read(
            {**s, "executable": s.get("executable", self.default_executable)}
        )
        for name in type(checked).model_fields:  # each setting becomes an attribute
            setattr(self, name, getattr(checked, name))
        self.env = dict(checked.env)
        if self.cwd is not None:
            s["cwd"] = self.cwd  # keep config() JSON-friendly

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.setting_names = tuple(cls.settings_model.model_fields)

    def config(self) -> dict[str, Any]:
        return {k: v for k, v in super().config().items() if k != "env"}

    # -- what a subclass says --------------------------------------------------------------
    @abstractmethod
    def command(self, request: ModelRequest) -> list[str]:
        """The argument list one run of ``request`` uses."""

    @abstractmethod
    def _translate(self, event: dict[str, Any], run: CLIRun) -> Iterator[StreamChunk]:
        """Chunks for one event; record in ``run`` what the reply needs (set ``done`` to stop)."""

    @abstractmethod
    def _finish(self, run: CLIRun, returncode: int, stderr: IO[bytes]) -> ModelResponse:
        """The reply of a run that ended with ``returncode``, or the typed error it earned."""

    # -- calls -----------------------------------------------------------------------------
    async def invoke(self, request: ModelRequest) -> ModelResponse:
        """Run the CLI to completion and return its result (tool calls already ran there).

        Cancel-safe: on cancellation or timeout the process group is stopped and reaped
        (shielded) before the cancellation propagates."""
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
        """Start the CLI and yield its events as chunks; the last one is a ``FinalChunk``.

        ``aclose()``, an error or a cancellation stops the child's process group (SIGTERM,
        then SIGKILL after :attr:`terminate_grace`) and reaps it before returning."""
        argv = self.command(request)
        env = {**os.environ, **self.env}
        if self.api_key is not None and self.child_key_env:
            env[self.child_key_env] = self.api_key.get_secret_value()
        stderr = tempfile.TemporaryFile()  # noqa: SIM115  # closed in the finally below
        process: Process | None = None
        try:
            process = await self._spawn(argv, env, stderr)
            await anyio.lowlevel.checkpoint()
            assert process.stdout is not None
            lines = BufferedByteReceiveStream(process.stdout)
            run = CLIRun()
            while not run.done:
                line = await self._read_line(lines)
                if line is None:
                    break
                event = self._parse(line)
                if event is None:
                    continue
                for chunk in self._translate(event, run):
                    yield chunk
            returncode = await process.wait()
            response = self._finish(run, returncode, stderr)
            yield UsageChunk(usage=response.usage)
            yield FinalChunk(response=response)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    if process is not None:
                        await self._reap(process)
                finally:
                    stderr.close()

    # -- starting the process --------------------------------------------------------------
    def prompt(self, request: ModelRequest) -> str:
        """The text of the last :class:`Instruction`: the prompt of one run."""
        prompt = next(
            (m.render_text() for m in reversed(request.messages) if isinstance(m, Instruction)),
            None,
        )
        if prompt is None:
            raise ConfigurationError(
                f"{self.name} needs an Instruction message: its text is the prompt of the run"
            )
        return prompt

    def prompt_with_system(self, request: ModelRequest) -> str:
        """:meth:`prompt`, with the :class:`System` text before it on a first turn (for CLIs
        that have no system-prompt flag; a resumed session has its system text already)."""
        prompt = self.prompt(request)
        if request.session_id:
            return prompt
        system = "\n\n".join(m.content for m in request.messages if isinstance(m, System))
        return f"{system}\n\n{prompt}" if system else prompt

    def _ended(
        self, run: CLIRun, returncode: int, stderr: IO[bytes], last_event: str
    ) -> dict[str, Any]:
        """The run's closing event, once a failed run has been ruled out: a non-zero exit is
        a ``ServerError``, a missing closing event a ``ProtocolError``."""
        if returncode != 0:
            raise self._server(f"exited with code {returncode}", returncode, stderr, None)
        if run.result is None:
            tail = self._tail(stderr)
            raise self._protocol(f"the CLI exited without a {last_event} event{tail}")
        return run.result

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
                    f"cannot start {argv[0]!r}{where}: {exc}; check the {self.name} "
                    "'executable' and 'cwd' settings"
                ) from exc
        return process

    def _resolve(self) -> list[str]:
        program, *rest = self.executable
        found = shutil.which(program)
        if found is None:
            raise ConfigurationError(
                f"{self.name} executable {program!r} was not found on PATH; install it or "
                f"pass executable='/path/to/{self.default_executable or 'cli'}' "
                "(or an argument list)"
            )
        return [found, *rest]

    # -- reading events --------------------------------------------------------------------
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

    # -- ending the process ----------------------------------------------------------------
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

    # -- errors ----------------------------------------------------------------------------
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


# -- small readers of events, shared by the CLI providers ----------------------------------
def str_or(value: Any, default: str | None) -> str | None:
    """``value`` when it is a non-empty string, else ``default``."""
    return value if isinstance(value, str) and value else default


def int_or_zero(value: Any) -> int:
    """``value`` when it is an int (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
