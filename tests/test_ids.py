"""Branch, message and turn ids: valid random version-4 UUIDs, unique, also across a fork."""

from __future__ import annotations

import gc
import os
import pickle
import subprocess
import sys
import uuid
from uuid import UUID

import pytest
from pydantic import ValidationError

from lionagi._ids import new_id
from lionagi.protocols.messages import Instruction


def test_ids_are_rfc_4122_version_4_uuids_equal_to_their_parsed_form() -> None:
    for _ in range(100):
        value = new_id()
        assert value.version == 4
        assert value.variant == "specified in RFC 4122"
        parsed = UUID(str(value))
        assert parsed == value
        assert hash(parsed) == hash(value)


def test_ids_do_not_repeat() -> None:
    assert len({new_id() for _ in range(50_000)}) == 50_000


def test_messages_get_such_ids_and_round_trip() -> None:
    message = Instruction(instruction="hi")
    assert message.id.version == 4
    assert Instruction.model_validate_json(message.model_dump_json()).id == message.id


FORK_SCRIPT = """
import os
from uuid import UUID
from lionagi._ids import new_id
new_id()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, new_id().bytes)
    os._exit(0)
os.close(write)
mine = new_id()
theirs = UUID(bytes=os.read(read, 16))
os.waitpid(pid, 0)
print(mine != theirs)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_other_ids_than_its_parent() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "True"


def test_a_branch_and_its_system_message_get_ids_without_reading_os_urandom(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lionagi import Branch

    def refuse(size: int) -> bytes:
        raise AssertionError("os.urandom was read")

    monkeypatch.setattr(os, "urandom", refuse)
    one, two = Branch(system="s"), Branch(system="s")
    assert one.id != two.id
    assert (one.id.version, one.msgs[0].id.version) == (4, 4)


def test_a_message_keeps_its_id_as_a_number_and_reading_it_gives_the_uuid() -> None:
    given = uuid.uuid4()
    for message in (Instruction(instruction="hi"), Instruction(instruction="hi", id=given)):
        kept = [o for o in gc.get_referents(message) if isinstance(o, UUID | int)]
        assert [type(o) for o in kept] == [int], kept  # no UUID object in the message
        assert message._key == kept[0] == message.id.int
        assert isinstance(message.id, UUID)
        assert message.id == message.id
        assert hash(message.id) == hash(UUID(int=message._key))
        assert message.model_dump()["id"] == message.id
        assert message.model_copy().id == message.id
        assert Instruction.model_validate(message.model_dump()) == message
        assert pickle.loads(pickle.dumps(message)) == message
    assert message.id == given
    assert Instruction(instruction="hi", id=str(given)).id == given  # type: ignore[arg-type]


def test_a_message_id_cannot_be_reassigned_or_deleted() -> None:
    message = Instruction(instruction="hi")
    before = message.id
    with pytest.raises(ValidationError):
        message.id = uuid.uuid4()  # type: ignore[misc]
    with pytest.raises(ValidationError):
        del message.id
    assert message.id == before
