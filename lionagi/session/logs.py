"""A Branch's logs: one record per model call and per tool call, dumped as JSON lines.

Records are cheap to make -- a model call's record is references to what the call already built
(the request's parts, the response itself) in one flat list, made into a :class:`Log` when
first read -- and become JSON only when read with :meth:`Log.to_dict` or dumped. Nothing
secret goes in: API keys live in the provider, never in a request, and option values whose
names look like credentials are masked on the way out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from time import time
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
_WIDTH = 11  # slots per record: a model call's 11 values (its start first, its outcome last)
_PADDING = (None,) * (_WIDTH - 1)


class Log:
    """One record of a Branch's logs (immutable). Read it with :meth:`to_dict`.

    ``kind`` is ``"api_call"`` or ``"tool_call"``; ``created_at`` the time (seconds since the
    epoch) the record was made, when the call ended; ``duration_ms`` how long the call took. A
    model call's two times are both read from the wall clock (``time.time()``, as OpenTelemetry
    times its spans): one clock read per end of the call.
    """

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
        self.created_at = time()
        self.branch_id = branch_id
        self.turn_id = turn_id
        self.duration_ms = duration_ms
        self._payload = payload

    @classmethod
    def _of(cls, entry: tuple[Any, ...]) -> Log:
        """The record of the values :meth:`LogManager.record_api_call` kept."""
        started, ended, branch_id, turn, provider, model, count, last, tools, settings, outcome = (
            entry
        )
        schema, options, session = (None, None, None) if settings is None else settings
        reply: ModelResponse | None = None
        error = None
        if isinstance(outcome, str):  # the failed call's error
            error = outcome
        else:  # the reply (None: a stream that ended without one)
            reply = outcome
        log = cls(
            "api_call",
            (provider, model, count, last, tools, schema, options, session, reply, error),
            branch_id=branch_id,
            turn_id=None if turn is None else UUID(int=turn),
            duration_ms=(ended - started) * 1000.0,
        )
        log.created_at = ended
        return log

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
                    "tools": [t.name for t in tools],
                    "response_format": schema,
                    "options": mask_secrets(options or {}),
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

    __slots__ = ("_capacity", "_oldest", "_slots", "dump_on_exit", "persist_path")

    def __init__(
        self,
        *,
        capacity: int | None = None,
        persist_path: str | Path | None = None,
        dump_on_exit: bool = False,
    ) -> None:
        if not isinstance(dump_on_exit, bool):
            raise ConfigurationError(f"dump_on_exit must be True or False, got {dump_on_exit!r}")
        self._capacity = _checked_capacity(capacity)
        self.persist_path = None if persist_path is None else _resolve(persist_path, "logs")
        self.dump_on_exit = dump_on_exit
        # every record is _WIDTH consecutive slots of one flat list: its Log in the first slot
        # (the rest None), or -- a model call not read yet -- the call's values, its start time
        # (a float) first.
        # Records then add no object per call for the garbage collector to walk.
        self._slots: list[Any] = []
        # a full bounded log is a ring: its oldest record is the _oldest-th, the next record
        # takes its place (0 while the log is unbounded or not yet full)
        self._oldest = 0

    @property
    def capacity(self) -> int | None:
        """How many records are kept (the newest); None: every record."""
        return self._capacity

    @capacity.setter
    def capacity(self, capacity: int | None) -> None:
        self._capacity = _checked_capacity(capacity)
        kept = self._in_order()
        if capacity is not None:
            del kept[: max(0, len(kept) - capacity * _WIDTH)]
        self._slots, self._oldest = kept, 0

    def __len__(self) -> int:
        return len(self._slots) // _WIDTH

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self._read()[index]
        count = len(self)
        if not -count <= index < count:
            raise IndexError("log index out of range")
        return self._log_at((self._oldest + index % count) % count * _WIDTH)

    def __iter__(self) -> Iterator[Log]:
        return iter(self._read())

    def append(self, log: Log) -> None:
        self._slots.append(log)
        self._slots.extend(_PADDING)
        if self._capacity is not None:
            self._bound()

    def record_api_call(
        self,
        provider: str,
        request: ModelRequest,
        response: ModelResponse | None,
        error: BaseException | None,
        branch_id: UUID | None,
        turn: int | None,
        started: float,
    ) -> None:
        """Record a model call that began at ``started`` (``time.time()``) and ends now, made
        in the turn whose id is ``UUID(int=turn)``.

        The hot path of every logged model call, so it only gathers references: the request's
        last message (the instruction, usually), how many messages were sent, its tools, its
        settings (schema title, options and session; None for the common request, which has
        none of them), and the response itself (immutable, only its field slots: keeping it
        costs a reference, less than copying its values). It never keeps a copy of the history
        or an exception object (which would keep the failed call's frames, and the Branch,
        alive). The values become a :class:`Log` when first read.
        """
        messages = request.messages
        outcome: ModelResponse | str | None = response
        if error is not None:  # failed (a stream may fail after its final reply: the error wins)
            outcome = f"{type(error).__name__}: {error}"
        slots = self._slots
        slots.extend(
            (
                started,
                time(),  # when the call ended: the record's created_at
                branch_id,  # the Branch's own
                turn,  # the turn id's int, not the UUID: one object less
                provider,
                request.model,
                len(messages),
                messages[-1] if messages else None,  # in the history (or about to be)
                request.tools,
                None  # the common request's settings: none, and nothing kept for them
                if request.response_format is None
                and not request.options
                and request.session_id is None
                else request_settings(request),
                outcome,
            )
        )
        if self._capacity is not None:
            self._bound()

    def _bound(self) -> None:
        """A full bounded log's newest record (just appended, at the end) takes the oldest
        one's place: O(1) per record."""
        slots, capacity = self._slots, self._capacity
        assert capacity is not None
        if len(slots) > capacity * _WIDTH:
            start = self._oldest * _WIDTH
            slots[start : start + _WIDTH] = slots[-_WIDTH:]
            del slots[-_WIDTH:]
            self._oldest = (self._oldest + 1) % capacity

    def _in_order(self) -> list[Any]:
        """The slots, oldest record first."""
        cut = self._oldest * _WIDTH
        return self._slots[cut:] + self._slots[:cut]

    def _log_at(self, start: int) -> Log:
        head = self._slots[start]
        if not isinstance(head, Log):  # a model call's values, not read yet
            head = Log._of(tuple(self._slots[start : start + _WIDTH]))
            self._slots[start : start + _WIDTH] = (head, *_PADDING)
        return head

    def clear(self) -> None:
        self._slots.clear()
        self._oldest = 0

    def to_list(self) -> list[dict[str, Any]]:
        """Every record as JSON-safe data."""
        return [log.to_dict() for log in self._read()]

    def _read(self) -> list[Log]:
        """Every record as a :class:`Log` (made once: later reads see the same record)."""
        cut = self._oldest * _WIDTH
        starts = [*range(cut, len(self._slots), _WIDTH), *range(0, cut, _WIDTH)]
        return [self._log_at(start) for start in starts]

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
        return path, self._read()

    def _forget(self, written: list[Log]) -> None:
        # only what was written: records appended meanwhile stay
        done = {id(log) for log in written}
        kept = [log for log in self._read() if id(log) not in done]
        self._slots = [slot for log in kept for slot in (log, *_PADDING)]
        self._oldest = 0

    def __repr__(self) -> str:
        return f"LogManager(records={len(self)}, capacity={self.capacity})"


def request_settings(
    request: ModelRequest,
) -> tuple[str | None, Mapping[str, Any] | None, str | None]:
    """A request's rarely set settings as a model call's log record keeps them: its schema's
    title, its options and its session (the common request has none of them, and its record
    keeps ``None`` without calling this)."""
    schema = request.response_format
    return (
        None if schema is None else schema.get("title"),
        request.options or None,
        request.session_id,
    )


def _checked_capacity(capacity: Any) -> int | None:
    if capacity is not None and (
        not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1
    ):
        raise ConfigurationError(f"log capacity must be a positive int or None, got {capacity!r}")
    return capacity


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
