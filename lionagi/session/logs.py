"""A Branch's logs: one record per model call and per tool call, dumped as JSON lines.

Records are cheap to make -- they keep references to what the call already built (the request,
the response, the tool's request and result) -- and become JSON only when read with
:meth:`Log.to_dict` or dumped. Nothing secret goes in: API keys live in the provider, never in a
request, and option values whose names look like credentials are masked on the way out.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

import anyio
from pydantic import SecretStr

from lionagi.errors import ConfigurationError

if TYPE_CHECKING:
    from lionagi.protocols.messages import ActionRequest, ActionResponse
    from lionagi.service.types import ModelRequest, ModelResponse

__all__ = ["DEFAULT_LOG_DIR", "Log", "LogManager"]

#: Where :meth:`LogManager.dump` writes when given no path (relative to the working directory).
DEFAULT_LOG_DIR = Path("data") / "logs"

LogKind = Literal["api_call", "tool_call"]

_SECRET_NAME = re.compile(r"key|token|secret|passw|authori[sz]ation|cookie|credential", re.I)
_MASK = "**********"


class Log:
    """One record of a Branch's logs (immutable). Read it with :meth:`to_dict`."""

    __slots__ = ("_payload", "branch_id", "created_at", "duration_ms", "kind", "turn_id")

    def __init__(
        self,
        kind: LogKind,
        payload: tuple[Any, ...],
        *,
        branch_id: UUID | None,
        turn_id: UUID | None,
        duration_ms: float,
    ) -> None:
        self.kind = kind
        self.created_at = time.time()
        self.branch_id = branch_id
        self.turn_id = turn_id
        self.duration_ms = duration_ms
        self._payload = payload

    @classmethod
    def api_call(
        cls,
        provider: str,
        request: ModelRequest,
        response: ModelResponse | None,
        error: BaseException | None,
        *,
        branch_id: UUID | None,
        turn_id: UUID | None,
        duration_ms: float,
    ) -> Log:
        """A model call: what was sent, what came back (or the error).

        The record keeps what is small and not in the history already: the request's last
        message (the instruction, usually), how many messages were sent, tool names, the
        schema's title and the options -- never a copy of the history or an exception object
        (which would keep the failed call's frames, and the Branch, alive).
        """
        schema = request.response_format
        payload = (
            provider,
            request.model,
            len(request.messages),
            request.messages[-1] if request.messages else None,
            tuple(t.name for t in request.tools) if request.tools else (),
            None if schema is None else schema.get("title"),
            request.options,
            request.session_id,
            response,
            None if error is None else f"{type(error).__name__}: {error}",
        )
        return cls(
            "api_call", payload, branch_id=branch_id, turn_id=turn_id, duration_ms=duration_ms
        )

    @classmethod
    def tool_call(
        cls,
        request: ActionRequest,
        response: ActionResponse,
        *,
        branch_id: UUID | None,
        turn_id: UUID | None,
        duration_ms: float,
    ) -> Log:
        """A tool call: its request and its (possibly error) response."""
        return cls(
            "tool_call",
            (request, response),
            branch_id=branch_id,
            turn_id=turn_id,
            duration_ms=duration_ms,
        )

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-safe data, with credential-like option values masked."""
        head: dict[str, Any] = {
            "kind": self.kind,
            "created_at": self.created_at,
            "branch_id": None if self.branch_id is None else str(self.branch_id),
            "turn_id": None if self.turn_id is None else str(self.turn_id),
            "duration_ms": self.duration_ms,
        }
        if self.kind == "api_call":
            (provider, model, count, last, tools, schema, options, session, response, error) = (
                self._payload
            )
            head.update(
                provider=provider,
                model=model,
                request={
                    "message_count": count,
                    "last_message": None if last is None else last.model_dump(mode="json"),
                    "tools": list(tools),
                    "response_format": schema,
                    "options": mask_secrets(options),
                    "session_id": session,
                },
                response=None if response is None else response.model_dump(mode="json"),
                error=error,
            )
        else:
            request, response = self._payload
            head.update(
                function=request.function,
                call_id=request.call_id,
                request=request.model_dump(mode="json"),
                response=response.model_dump(mode="json"),
            )
        return head

    def __repr__(self) -> str:
        return f"Log(kind={self.kind!r}, turn_id={self.turn_id}, ms={self.duration_ms:.3f})"


def mask_secrets(value: Any) -> Any:
    """``value`` made JSON-safe, with every mapping entry whose key names a credential (key,
    token, secret, password, authorization, cookie) and every ``SecretStr`` masked."""
    if isinstance(value, SecretStr):
        return _MASK
    if isinstance(value, Mapping):
        return {
            str(k): _MASK if _SECRET_NAME.search(str(k)) else mask_secrets(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_secrets(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


class LogManager(Sequence[Log]):
    """The logs of one Branch, oldest first: an API-call record per model call made in its
    turns and a tool-call record per tool call.

    ``capacity`` (None: unbounded) keeps only the newest records. ``persist_path`` is where
    :meth:`dump` writes when called without a path. With ``dump_on_exit``, leaving
    ``async with Branch(...)`` dumps whatever is left.
    """

    __slots__ = ("_logs", "capacity", "dump_on_exit", "persist_path")

    def __init__(
        self,
        *,
        capacity: int | None = None,
        persist_path: str | Path | None = None,
        dump_on_exit: bool = False,
    ) -> None:
        if capacity is not None and (
            not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1
        ):
            raise ConfigurationError(
                f"log capacity must be a positive int or None, got {capacity!r}"
            )
        if not isinstance(dump_on_exit, bool):
            raise ConfigurationError(f"dump_on_exit must be True or False, got {dump_on_exit!r}")
        self.capacity = capacity
        self.persist_path = None if persist_path is None else _resolve(persist_path, "logs")
        self.dump_on_exit = dump_on_exit
        self._logs: list[Log] = []

    def __len__(self) -> int:
        return len(self._logs)

    def __getitem__(self, index: Any) -> Any:
        return self._logs[index]

    def __iter__(self) -> Iterator[Log]:
        return iter(self._logs)

    def append(self, log: Log) -> None:
        self._logs.append(log)
        if self.capacity is not None and len(self._logs) > self.capacity:
            del self._logs[0]

    def clear(self) -> None:
        self._logs.clear()

    def to_list(self) -> list[dict[str, Any]]:
        """Every record as JSON-safe data."""
        return [log.to_dict() for log in self._logs]

    def dump(
        self,
        persist_path: str | Path | None = None,
        *,
        clear: bool = True,
        name: str = "logs",
    ) -> Path:
        """Write every record as one JSON line to ``persist_path`` and return the path.

        Without a path, :attr:`persist_path`, else a new file ``<name>-<UTC time>.jsonl``
        under :data:`DEFAULT_LOG_DIR`.
        Parent folders are created; an existing file is appended to. ``clear`` (default) empties
        the logs once written. Blocking file I/O: from async code use ``adump``.
        """
        path, logs = self._lines(persist_path, name)
        _write_lines(path, logs)
        if clear:
            self._forget(logs)
        return path

    async def adump(
        self,
        persist_path: str | Path | None = None,
        *,
        clear: bool = True,
        name: str = "logs",
    ) -> Path:
        """:meth:`dump` in a worker thread. Not cancel-safe mid-write: the file may hold some of
        the lines; the logs are cleared only once every line was written."""
        path, logs = self._lines(persist_path, name)
        await anyio.to_thread.run_sync(_write_lines, path, logs)
        if clear:
            self._forget(logs)
        return path

    def _lines(self, persist_path: str | Path | None, name: str) -> tuple[Path, list[Log]]:
        path = _resolve(self.persist_path if persist_path is None else persist_path, name)
        return path, list(self._logs)

    def _forget(self, written: list[Log]) -> None:
        # only what was written: records appended meanwhile stay
        done = {id(log) for log in written}
        self._logs = [log for log in self._logs if id(log) not in done]

    def __repr__(self) -> str:
        return f"LogManager(records={len(self._logs)}, capacity={self.capacity})"


def _resolve(persist_path: str | Path | None, name: str) -> Path:
    if persist_path is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        return DEFAULT_LOG_DIR / f"{name}-{stamp}.jsonl"
    if not isinstance(persist_path, str | Path):
        raise ConfigurationError(
            f"persist_path must be a str or a pathlib.Path, got {type(persist_path).__name__}"
        )
    return Path(persist_path)


def _write_lines(path: Path, logs: list[Log]) -> None:
    lines = [json.dumps(log.to_dict(), ensure_ascii=False) for log in logs]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)
