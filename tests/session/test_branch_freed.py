"""A Branch dropped after a failed or cancelled turn is freed by reference counting alone.

The turn driver hands a body's exception back to the frame that re-raises it; a frame that
kept that exception in a local would sit in the exception's own traceback, a reference cycle
holding every frame of the turn (and through them the Branch) until the cyclic collector ran.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from lionagi import Branch
from lionagi.testing import FunctionModel


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _cancelled_turn() -> weakref.ref[Branch]:
    with anyio.CancelScope() as scope:

        async def block(messages: Any, **options: Any) -> str:
            scope.cancel()
            await anyio.sleep_forever()
            return "never"

        branch = Branch(system="s", chat_model=FunctionModel(block))
        await branch.chat_and_record("hi")
    assert scope.cancelled_caught
    return weakref.ref(branch)


async def _failed_turn() -> weakref.ref[Branch]:
    def fail(messages: Any, **options: Any) -> str:
        raise ValueError("model failed")

    branch = Branch(system="s", chat_model=FunctionModel(fail))
    with pytest.raises(ValueError, match="model failed"):
        await branch.chat_and_record("hi")
    return weakref.ref(branch)


@pytest.mark.usefixtures("no_cycle_collector")
async def test_a_branch_dropped_after_a_cancelled_turn_is_freed_by_refcount() -> None:
    ref = await _cancelled_turn()
    assert ref() is None


@pytest.mark.usefixtures("no_cycle_collector")
async def test_a_branch_dropped_after_a_failed_turn_is_freed_by_refcount() -> None:
    ref = await _failed_turn()
    assert ref() is None
