"""A durable conversation store on SQLite: conversations that survive restarts.

:class:`ConversationStore` keeps each Branch's history as append-only rows in one SQLite file
(stdlib ``sqlite3``, run in a worker thread through ``anyio.to_thread``, so it works on asyncio
and trio). The database runs in WAL mode and every message is appended in its own transaction:
a process killed at any moment leaves every message whose append returned, and never part of
one. Rows cannot be updated or deleted (triggers refuse it). Several tasks, and several
processes, may write to one file at once: SQLite serializes the writers and each append picks
its position inside its own transaction.

::

    store = ConversationStore("conversations.db")
    async with store.track(branch):          # every message recorded inside is appended
        await branch.operate(instruction="...")
    await store.save(other_branch)           # or append what is not stored yet, explicitly
    restored = await store.load(branch.id, tools=[...])

SQLite fits one machine: a process or a few writing to a local disk; each append waits for
its fsync, so the disk's sync rate bounds throughput (``python -m benchmarks.store``). Move to
a server database (PostgreSQL) when several machines must write the same conversations, when
a network filesystem is involved (SQLite's locking is unreliable there), or when write volume
outgrows one file; keep the same shape -- an append-only messages
table keyed by (branch id, position) and a branches table -- and write the rows from
``MessageAdded`` signals or after each turn.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Unpack
from uuid import UUID

import anyio
from anyio.abc import TaskGroup

from lionagi._loopbound import LoopBound
from lionagi.errors import ConfigurationError, StoreError
from lionagi.protocols.messages import Message, message_from_dict

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from lionagi.session.branch import Branch, RestoreOptions

__all__ = ["ConversationStore", "StoreError"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS branches (
    id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    branch_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    created_at REAL NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (branch_id, seq),
    UNIQUE (branch_id, id)
);
CREATE TRIGGER IF NOT EXISTS messages_append_only_update BEFORE UPDATE ON messages
BEGIN SELECT RAISE(ABORT, 'messages are append-only'); END;
CREATE TRIGGER IF NOT EXISTS messages_append_only_delete BEFORE DELETE ON messages
BEGIN SELECT RAISE(ABORT, 'messages are append-only'); END;
"""


def _wait_for_setup() -> None:
    time.sleep(0.005)  # in the worker thread: another connection's setup takes milliseconds


def _set_up(connection: sqlite3.Connection, wait: float) -> None:
    """WAL mode, full sync and the schema on a new connection (all idempotent).

    Switching a file to WAL, or creating the schema while another connection is doing the
    same, is refused by SQLite at once with "database is locked": the busy handler is not
    called, since waiting could deadlock. So the setup is tried again, up to ``wait``
    seconds, as a write would wait. Runs in the store's worker thread.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            connection.executescript(_SCHEMA)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            _wait_for_setup()


class ConversationStore:
    """Branch histories in one SQLite file (created if missing); see the module docs.

    ``busy_timeout`` (seconds) is how long a write waits for another process's write to finish.
    Use it as ``async with ConversationStore(path) as store`` or call :meth:`aclose`.
    Every async method runs its SQL in a worker thread and waits for it even when cancelled
    (an append that started completes or rolls back as a whole; the cancellation is then
    raised), so a cancelled caller never leaves a transaction open.
    """

    def __init__(self, path: str | Path, *, busy_timeout: float = 30.0) -> None:
        if not isinstance(path, str | Path) or not str(path):
            raise ConfigurationError(f"store path must be a file path, got {path!r}")
        if not isinstance(busy_timeout, int | float) or not busy_timeout > 0:
            raise ConfigurationError(
                f"busy_timeout must be a positive number of seconds, got {busy_timeout!r}"
            )
        self.path = Path(path)
        self.busy_timeout = float(busy_timeout)
        self._connection: sqlite3.Connection | None = None
        # one worker thread at a time uses the connection
        self._limiter: LoopBound[anyio.CapacityLimiter] = LoopBound(
            lambda: anyio.CapacityLimiter(1), lambda lim: lim.borrowed_tokens == 0
        )
        self._closed = False

    # -- running SQL ---------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"conversation store {self.path} is closed")
        if self._connection is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                connection = sqlite3.connect(
                    self.path,
                    timeout=self.busy_timeout,
                    isolation_level=None,  # explicit BEGIN/COMMIT
                    check_same_thread=False,  # used by one worker thread at a time
                )
                _set_up(connection, self.busy_timeout)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open conversation store {self.path}: {exc}") from exc
            self._connection = connection
        return self._connection

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def work() -> T:
            connection = self._connect()
            try:
                return fn(connection)
            except sqlite3.Error as exc:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise StoreError(f"conversation store {self.path}: {exc}") from exc

        return await anyio.to_thread.run_sync(work, limiter=self._limiter.get())

    # -- writing -------------------------------------------------------------------------
    async def append(self, branch_id: UUID, message: Message) -> bool:
        """Append one message to ``branch_id``'s history, in its own transaction.

        Returns False (and writes nothing) when a message with this id is already stored.
        """
        row = _row(message)
        return await self._run(lambda db: _append(db, str(branch_id), row))

    async def save(self, branch: Branch) -> int:
        """Store ``branch``'s configuration and append every message of its history not yet
        stored, in order, one transaction per message; returns how many were appended."""
        config = branch.to_dict()
        del config["messages"]
        rows = [_row(message) for message in branch.msgs]
        branch_id = str(branch.id)

        def work(db: sqlite3.Connection) -> int:
            _put_config(db, branch_id, config)
            stored = {
                r[0]
                for r in db.execute("SELECT id FROM messages WHERE branch_id = ?", (branch_id,))
            }
            return sum(_append(db, branch_id, row) for row in rows if row[0] not in stored)

        return await self._run(work)

    def track(self, branch: Branch) -> Tracking:
        """``async with store.track(branch):`` stores the branch's configuration and every
        message not yet stored on entry, then appends each message the branch records inside
        the block as it is recorded (one transaction each, in recording order). Leaving the
        block waits until every message recorded inside is stored."""
        return Tracking(self, branch)

    # -- reading -------------------------------------------------------------------------
    async def branch_ids(self) -> list[UUID]:
        """Every stored branch, in the order they were first stored."""
        rows = await self._run(
            lambda db: db.execute(
                "SELECT id FROM branches UNION SELECT branch_id FROM messages"
            ).fetchall()
        )
        return [UUID(r[0]) for r in rows]

    async def messages(self, branch_id: UUID) -> list[Message]:
        """``branch_id``'s stored history, in order."""
        rows = await self._run(
            lambda db: db.execute(
                "SELECT data FROM messages WHERE branch_id = ? ORDER BY seq", (str(branch_id),)
            ).fetchall()
        )
        return [message_from_dict(json.loads(r[0])) for r in rows]

    async def load(self, branch_id: UUID, **restoring: Unpack[RestoreOptions]) -> Branch:
        """Rebuild a Branch (same id) from the store: its history and configuration.

        ``restoring`` is :meth:`Branch.from_dict`'s: API keys come from the environment and
        tools are passed again; ``chat_model`` / ``parse_model`` replace the stored models
        (needed for the offline models of :mod:`lionagi.testing`, whose code is not stored).
        """
        from lionagi.session.branch import Branch

        key = str(branch_id)

        def work(db: sqlite3.Connection) -> tuple[Any, list[Any]]:
            config = db.execute("SELECT config FROM branches WHERE id = ?", (key,)).fetchone()
            rows = db.execute(
                "SELECT data FROM messages WHERE branch_id = ? ORDER BY seq", (key,)
            ).fetchall()
            return config, rows

        config_row, rows = await self._run(work)
        if config_row is None and not rows:
            raise StoreError(f"no branch {branch_id} in conversation store {self.path}")
        data: dict[str, Any] = {"id": key} if config_row is None else json.loads(config_row[0])
        data["messages"] = [json.loads(r[0]) for r in rows]
        return Branch.from_dict(data, **restoring)

    # -- closing -------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the database connection (shielded; later calls raise StoreError)."""
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._close, limiter=self._limiter.get())

    def _close(self) -> None:
        self._closed = True
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def __aenter__(self) -> ConversationStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"ConversationStore({str(self.path)!r})"


class Tracking:
    """What :meth:`ConversationStore.track` returns: an async context manager that appends a
    branch's messages as they are recorded. A writer task, started on entry, takes them from
    an unbounded queue filled by the history's on-added callback."""

    def __init__(self, store: ConversationStore, branch: Branch) -> None:
        self.store = store
        self.branch = branch
        self._group: TaskGroup | None = None
        self._send: MemoryObjectSendStream[Message] | None = None
        self._remove: Callable[[], None] | None = None

    async def __aenter__(self) -> Tracking:
        if self._group is not None:
            raise StoreError("this tracking block is already open; call store.track() again")
        # Listen first, then store what exists: a message recorded meanwhile is queued and
        # also in the history; its second append is a no-op, and the order is kept.
        send, receive = anyio.create_memory_object_stream[Message](math.inf)
        self._remove = self.branch.msgs.on_added(send.send_nowait)
        try:
            await self.store.save(self.branch)
            group = anyio.create_task_group()
            await group.__aenter__()
        except BaseException:
            self._remove()
            send.close()
            receive.close()
            raise
        self._group, self._send = group, send
        group.start_soon(self._write, receive)
        return self

    async def _write(self, receive: MemoryObjectReceiveStream[Message]) -> None:
        branch_id = self.branch.id
        async with receive:
            async for message in receive:
                await self.store.append(branch_id, message)

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        if self._group is None or self._send is None or self._remove is None:
            raise StoreError("this tracking block was never entered")
        self._remove()
        self._send.close()  # the writer drains what is queued, then ends
        group, self._group = self._group, None
        return await group.__aexit__(*exc_info)


def _row(message: Message) -> tuple[str, str, float, str]:
    dumped = message.model_dump(mode="json")
    return (str(message.id), str(dumped["kind"]), message.created_at, json.dumps(dumped))


def _append(db: sqlite3.Connection, branch_id: str, row: tuple[str, str, float, str]) -> bool:
    db.execute("BEGIN IMMEDIATE")  # take the write lock before reading the next position
    try:
        cursor = db.execute(
            "INSERT OR IGNORE INTO messages (branch_id, seq, id, kind, created_at, data) "
            "SELECT ?, COALESCE(MAX(seq), -1) + 1, ?, ?, ?, ? FROM messages WHERE branch_id = ?",
            (branch_id, *row, branch_id),
        )
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return cursor.rowcount == 1


def _put_config(db: sqlite3.Connection, branch_id: str, config: dict[str, Any]) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(
            "INSERT INTO branches (id, config, updated_at) VALUES (?, ?, ?) ON CONFLICT(id) "
            "DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at",
            (branch_id, json.dumps(config), time.time()),
        )
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
