"""The SQLite conversation store: round trips, tracking a live branch, append-only rows,
concurrent writers, and a process killed mid-turn or mid-write."""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import lionagi.store as store_module
from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import ActionResponse, Instruction, Message, ToolCall
from lionagi.session.branch import Branch
from lionagi.store import ConversationStore, StoreError
from lionagi.testing import FunctionModel, TestModel


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adder() -> FunctionModel:
    def fn(messages: Sequence[Message], **options: Any) -> Any:
        if options.get("tools") and not any(isinstance(m, ActionResponse) for m in messages):
            return ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})
        return "5"

    return FunctionModel(fn)


def rows(path: Path) -> list[tuple[str, int, str, str]]:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT branch_id, seq, id, data FROM messages ORDER BY branch_id, seq"
        ).fetchall()


async def test_save_then_load_restores_history_and_configuration(tmp_path: Path) -> None:
    branch = Branch(system="be brief", chat_model=adder(), tools=[add], name="calc", user="ann")
    await branch.operate(instruction="add", actions=True)
    async with ConversationStore(tmp_path / "c.db") as store:
        assert await store.save(branch) == len(branch.msgs)
        assert await store.save(branch) == 0  # nothing new: idempotent
        restored = await store.load(branch.id, tools=[add], chat_model=adder())
        assert await store.branch_ids() == [branch.id]
    assert restored.id == branch.id
    assert (restored.name, restored.user) == ("calc", "ann")
    assert list(restored.msgs) == list(branch.msgs)
    assert restored.tools.names == branch.tools.names
    # the restored branch goes on where the stored one stopped
    await restored.chat_and_record("again")
    assert len(restored.msgs) == len(branch.msgs) + 2


async def test_load_errors_are_typed(tmp_path: Path) -> None:
    async with ConversationStore(tmp_path / "c.db") as store:
        with pytest.raises(StoreError, match="no branch"):
            await store.load(uuid4())
        branch = Branch(chat_model=TestModel(["x"]))
        await store.save(branch)
        with pytest.raises(ConfigurationError, match="offline model"):
            await store.load(branch.id)  # the offline model's script is not stored
    with pytest.raises(StoreError, match="closed"):
        await store.messages(branch.id)
    with pytest.raises(ConfigurationError, match="busy_timeout"):
        ConversationStore(tmp_path / "d.db", busy_timeout=0)


async def test_track_appends_each_message_as_the_branch_records_it(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "c.db")
    branch = Branch(system="sys", chat_model=adder(), tools=[add])
    async with store.track(branch):
        await branch.operate(instruction="add", actions=True)
        await branch.chat_and_record("and now?")
    stored = await store.messages(branch.id)
    assert [m.id for m in stored] == [m.id for m in branch.msgs]
    assert stored == list(branch.msgs)
    # recorded after the block: not stored
    await branch.chat_and_record("later")
    assert len(await store.messages(branch.id)) == len(stored)
    await store.aclose()


async def test_a_clone_is_stored_as_its_own_conversation(tmp_path: Path) -> None:
    branch = Branch(chat_model=adder())
    await branch.chat_and_record("hi")
    copy = branch.clone()  # same message ids, new branch id
    async with ConversationStore(tmp_path / "c.db") as store:
        await store.save(branch)
        assert await store.save(copy) == 2
        assert [m.id for m in await store.messages(copy.id)] == [m.id for m in branch.msgs]


async def test_rows_are_append_only(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with ConversationStore(path) as store:
        await store.append(uuid4(), Instruction(instruction="keep me"))
    with sqlite3.connect(path) as db:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute("UPDATE messages SET data = '{}'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute("DELETE FROM messages")
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_a_first_open_waits_out_another_connections_write_instead_of_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.db"
    # another connection writes to the new file, still in rollback-journal mode: SQLite refuses
    # the switch to WAL at once ("database is locked") rather than through its busy handler
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE other (a)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO other VALUES (1)")
    waits: list[bool] = []

    def other_write_ends() -> None:  # the store's pause before trying its setup again
        waits.append(other.in_transaction)
        if other.in_transaction:
            other.execute("COMMIT")

    monkeypatch.setattr(store_module, "_wait_for_setup", other_write_ends)
    async with ConversationStore(path) as store:
        assert await store.append(uuid4(), Instruction(instruction="after the other write"))
    other.close()
    assert waits == [True]  # refused once while the other write was open, then set up
    assert len(rows(path)) == 1


async def test_1000_concurrent_appends_across_50_branches_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    # two stores are two connections: concurrent writers that SQLite itself must serialize
    stores = [ConversationStore(path), ConversationStore(path)]
    branch_ids = [uuid4() for _ in range(50)]
    sent: dict[UUID, list[Message]] = {b: [] for b in branch_ids}

    async def append(index: int) -> None:
        branch_id = branch_ids[index % 50]
        message = Instruction(instruction=f"message {index}")
        sent[branch_id].append(message)
        assert await stores[index % 2].append(branch_id, message)

    async with anyio.create_task_group() as group:
        for index in range(1000):
            group.start_soon(append, index)
    for store in stores:
        await store.aclose()

    stored = rows(path)
    assert len(stored) == 1000
    async with ConversationStore(path) as store:
        for branch_id in branch_ids:
            messages = await store.messages(branch_id)
            assert sorted(str(m.id) for m in messages) == sorted(str(m.id) for m in sent[branch_id])
    by_branch: dict[str, list[int]] = {}
    for stored_branch, seq, _, _ in stored:
        by_branch.setdefault(stored_branch, []).append(seq)
    assert all(seqs == list(range(20)) for seqs in by_branch.values())


_CHILD = textwrap.dedent(
    """
    import sys

    import anyio

    from lionagi.protocols.messages import ActionResponse, Instruction, ToolCall
    from lionagi.session.branch import Branch
    from lionagi.store import ConversationStore
    from lionagi.testing import FunctionModel


    class Loud(ConversationStore):
        async def append(self, branch_id, message):
            added = await super().append(branch_id, message)
            print("STORED", message.id, flush=True)
            return added

        async def save(self, branch):
            count = await super().save(branch)
            for message in branch.msgs:  # all stored now
                print("STORED", message.id, flush=True)
            return count


    async def mid_turn(path):
        store = Loud(path)

        async def hang() -> str:
            \"\"\"A tool that never returns.\"\"\"
            print("IN_TOOL", len(branch.msgs), flush=True)
            await anyio.sleep_forever()

        def fn(messages, **options):
            if any(isinstance(m, ActionResponse) for m in messages):
                return "never reached"
            return ToolCall(id="c1", name="hang", arguments={})

        branch = Branch(system="sys", chat_model=FunctionModel(fn), tools=[hang])
        print("BRANCH", branch.id, flush=True)
        async with store.track(branch):
            await branch.operate(instruction="go", actions=True)


    async def flood(path):
        store = Loud(path)
        branch_id = "00000000-0000-4000-8000-000000000001"
        from uuid import UUID
        index = 0
        while True:
            index += 1
            await store.append(UUID(branch_id), Instruction(instruction="x" * 2000 + str(index)))


    anyio.run({"mid_turn": mid_turn, "flood": flood}[sys.argv[1]], sys.argv[2])
    """
)


async def _run_child(mode: str, path: Path, stop: Any) -> list[str]:
    """Run the child, read its lines until ``stop(lines)``, then SIGKILL it."""
    lines: list[str] = []
    process = await anyio.open_process([sys.executable, "-c", _CHILD, mode, str(path)])
    try:
        assert process.stdout is not None
        reader = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(60):
            while not stop(lines):
                lines.append((await reader.receive_until(b"\n", 1 << 16)).decode())
    finally:
        process.send_signal(signal.SIGKILL)
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()
    assert process.returncode == -signal.SIGKILL
    return lines


async def test_a_process_killed_mid_turn_leaves_every_stored_message_and_no_partial_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"

    def tool_running_and_all_stored(lines: list[str]) -> bool:
        tool = [line for line in lines if line.startswith("IN_TOOL")]
        stored = [line for line in lines if line.startswith("STORED")]
        return bool(tool) and len(stored) >= int(tool[0].split()[1])

    lines = await _run_child("mid_turn", path, tool_running_and_all_stored)
    branch_id = UUID(lines[0].split()[1])
    stored_ids = [line.split()[1] for line in lines if line.startswith("STORED")]

    async with ConversationStore(path) as store:
        messages = await store.messages(branch_id)
        restored = await store.load(branch_id, chat_model=adder())
    assert [str(m.id) for m in messages] == stored_ids
    # system, instruction, the reply and its tool call: committed before the tool ran
    assert [m.model_dump()["kind"] for m in messages] == [
        "system",
        "instruction",
        "assistant",
        "action_request",
    ]
    assert list(restored.msgs) == messages


async def test_a_process_killed_mid_write_leaves_only_whole_messages(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    lines = await _run_child("flood", path, lambda lines: len(lines) >= 200)
    reported = [line.split()[1] for line in lines]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    stored = rows(path)
    ids = [row[2] for row in stored]
    # every append that returned is there, in order (the child went on until it was killed)
    assert ids[: len(reported)] == reported
    assert [row[1] for row in stored] == list(range(len(stored)))
    for _, _, _, data in stored:
        assert json.loads(data)["instruction"].startswith("x" * 2000)
