"""alcall / bcall: order, limits, retries, timeouts and failure on one task group."""

from __future__ import annotations

import anyio
import pytest

import lionagi
from lionagi import alcall, bcall
from lionagi.errors import ConfigurationError


async def test_results_come_back_in_input_order() -> None:
    async def slow_first(x: int) -> int:
        for _ in range(10 - x):  # earlier items take more checkpoints
            await anyio.lowlevel.checkpoint()
        return x * 2

    assert await alcall(list(range(10)), slow_first) == [x * 2 for x in range(10)]
    assert lionagi.alcall is alcall


async def test_sync_functions_and_kwargs() -> None:
    def add(x: int, *, y: int) -> int:
        return x + y

    assert await alcall([1, 2], add, y=10) == [11, 12]
    assert await alcall(5, add, y=1) == [6]  # a single item


async def test_max_concurrent_is_never_exceeded() -> None:
    in_flight = 0
    peak = 0
    full = anyio.Event()

    async def work(x: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 4:
            full.set()
        await full.wait()
        await anyio.lowlevel.checkpoint()
        in_flight -= 1
        return x

    assert await alcall(list(range(30)), work, max_concurrent=4) == list(range(30))
    assert peak == 4


async def test_retries_with_backoff_then_success() -> None:
    attempts: dict[int, int] = {}

    async def flaky(x: int) -> int:
        attempts[x] = attempts.get(x, 0) + 1
        if attempts[x] < 3:
            raise ConnectionError("again")
        return x

    delays: list[float] = []
    real_sleep = anyio.sleep

    async def recording_sleep(seconds: float) -> None:
        delays.append(seconds)
        await real_sleep(0)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(anyio, "sleep", recording_sleep)
        result = await alcall(
            [1], flaky, retry_attempts=2, retry_initial_delay=0.01, retry_backoff=3
        )
    assert result == [1]
    assert attempts == {1: 3}
    assert delays == pytest.approx([0.01, 0.03])


async def test_spent_retries_raise_the_failure_itself_or_return_the_default() -> None:
    calls = 0

    async def broken(x: int) -> int:
        nonlocal calls
        calls += 1
        raise ValueError(f"bad {x}")

    with pytest.raises(ValueError, match="bad 7"):
        await alcall([7], broken, retry_attempts=1)
    assert calls == 2
    assert await alcall([1, 2], broken, retry_default="fallback") == ["fallback", "fallback"]


async def test_a_failure_cancels_the_rest() -> None:
    cancelled: list[int] = []
    started = anyio.Event()

    async def work(x: int) -> int:
        if x == 0:
            await started.wait()
            raise KeyError("first")
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.append(x)
            raise
        return x

    before = len(anyio.get_running_tasks())
    with pytest.raises(KeyError, match="first"):
        await alcall([0, 1, 2], work)
    assert sorted(cancelled) == [1, 2]
    assert len(anyio.get_running_tasks()) == before


async def test_return_exceptions_keeps_going() -> None:
    async def half(x: int) -> int:
        if x % 2:
            raise ValueError(x)
        return x

    out = await alcall([0, 1, 2, 3], half, return_exceptions=True)
    assert out[0] == 0
    assert out[2] == 2
    assert isinstance(out[1], ValueError)
    assert isinstance(out[3], ValueError)


async def test_retry_timeout_bounds_each_attempt() -> None:
    attempts = 0

    async def hang_once(x: int) -> int:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await anyio.sleep_forever()
        return x

    assert await alcall([3], hang_once, retry_timeout=0.05, retry_attempts=1) == [3]

    async def hang(x: int) -> int:
        await anyio.sleep_forever()
        return x

    with pytest.raises(TimeoutError):
        await alcall([3], hang, retry_timeout=0.01)


async def test_input_and_output_shaping() -> None:
    async def ident(x: object) -> object:
        return x

    assert await alcall([[1, [2]], None, 2], ident, input_flatten=True, input_dropna=True) == [
        1,
        2,
        2,
    ]
    assert await alcall([1, 1, 2], ident, input_unique=True) == [1, 2]

    async def pair(x: int) -> list[int | None]:
        return [x, None]

    assert await alcall([1, 2], pair, output_flatten=True, output_dropna=True) == [1, 2]


async def test_bad_arguments_are_clear_errors() -> None:
    async def f(x: int) -> int:
        return x

    with pytest.raises(ConfigurationError, match="max_concurrent"):
        await alcall([1], f, max_concurrent=0)
    with pytest.raises(ConfigurationError, match="retry_attempts"):
        await alcall([1], f, retry_attempts=-1)
    with pytest.raises(ConfigurationError, match="not both"):
        await alcall([1], f, retry_initial_delay=1, retry_delay=1)


async def test_bcall_yields_batches_in_order() -> None:
    async def square(x: int) -> int:
        return x * x

    batches = [batch async for batch in bcall(list(range(7)), square, 3, max_concurrent=2)]
    assert batches == [[0, 1, 4], [9, 16, 25], [36]]
    with pytest.raises(ConfigurationError, match="batch_size"):
        async for _ in bcall([1], square, 0):
            pass
