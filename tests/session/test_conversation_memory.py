"""What a one-turn conversation keeps, counted in objects (structure, not timing).

A kept conversation's size is mostly its messages: each must be one object holding its field
values (its id kept as the UUID's number, not a UUID object), not a pydantic model with an
instance dict, a fields-set and a private-attribute dict; the reply's usage one object too.
The whole conversation has a bound on the objects the cyclic garbage collector tracks for it.
"""

from __future__ import annotations

import gc
from uuid import UUID

import anyio

from benchmarks._common import offline_model
from benchmarks.memory import kept_objects
from lionagi import Branch
from lionagi.protocols.messages import AssistantResponse
from lionagi.protocols.tools import ToolRegistry

#: the gc-tracked objects a one-turn conversation (system message, instruction, reply) keeps:
#: 3 for its three messages (their ids are numbers, not tracked), 1 usage, 4 for the history
#: (manager, list, callbacks and the one callback, a weak reference to the Branch), 4 for the
#: logs' record of the model call (the log, its slot list, the Branch id it names, the reply
#: itself: immutable and only its field slots, cheaper to keep than to copy), 1 for the idle
#: turn lock (no semaphore while no turn waits), 1 for the Branch (slotted; its tool registry
#: is made when first used)
TRACKED_PER_CONVERSATION = 14


async def _conversations(count: int) -> list[Branch]:
    model = offline_model()  # one model shared by every conversation, keeping no request log
    branches = []
    for _ in range(count):
        branch = Branch(system="You are a helpful assistant.", chat_model=model)
        await branch.chat_and_record("hello there")
        branches.append(branch)
    await anyio.sleep(0)  # asyncio: the loop drops the model call's cancelled timer
    gc.collect()
    return branches


async def test_each_kept_message_is_one_tracked_object_its_id_a_number() -> None:
    branches = await _conversations(3)
    mine = kept_objects(branches[0], *branches[1:])
    for message in branches[0].msgs:
        own = kept_objects(message, *[m for m in branches[0].msgs if m is not message])
        own = {key: obj for key, obj in own.items() if key in mine}  # not shared with others
        if isinstance(message, AssistantResponse):
            usage = own.pop(id(message.usage))
            assert not [o for o in gc.get_referents(usage) if id(o) in mine]  # ints, None
        tracked = sorted(type(o).__name__ for o in own.values() if gc.is_tracked(o))
        assert tracked == [type(message).__name__]
        assert not [o for o in own.values() if isinstance(o, UUID)]
        assert message.id.int in [o for o in own.values() if type(o) is int]


async def test_a_one_turn_conversation_keeps_a_bounded_number_of_tracked_objects() -> None:
    branches = await _conversations(3)
    branch = branches[0]
    mine = kept_objects(branch, *branches[1:])
    tracked = [o for o in mine.values() if gc.is_tracked(o)]
    assert len(tracked) <= TRACKED_PER_CONVERSATION, sorted(type(o).__name__ for o in tracked)


async def test_an_idle_conversation_keeps_no_lock_primitive_closure_or_empty_container() -> None:
    branches = await _conversations(3)
    mine = kept_objects(branches[0], *branches[1:])
    kinds = {type(o).__name__ for o in mine.values()}
    # no turn semaphore and its waiter deque, no instance dict, no on-added closure and cell,
    # no empty tool dict or resume-id dict of its own
    assert not kinds & {"Semaphore", "deque", "dict", "function", "cell"}, kinds
    assert not hasattr(branches[0], "__dict__")
    assert "ToolRegistry" not in kinds  # a chat turn never needs the Branch's tools


def test_a_branch_makes_its_tool_registry_once_when_first_used() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    branch = Branch()
    registry = branch.tools
    assert branch.tools is registry
    assert list(registry) == []
    with_tools = Branch(tools=[add])
    assert list(with_tools.tools) == ["add"]
    assert with_tools.tools is with_tools.tools
    assert list(with_tools.clone().tools) == ["add"]
    assert list(Branch().clone().tools) == []


def test_tool_registries_share_the_empty_mapping_until_one_registers() -> None:
    first, second = ToolRegistry(), ToolRegistry()

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    first.register(add)
    assert first.names == ("add",)
    assert second.names == ()
    copied = first.copy()
    copied.remove("add")
    assert first.names == ("add",)
    assert second.copy().names == ()
