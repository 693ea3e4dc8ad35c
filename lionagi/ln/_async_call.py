"""``alcall`` and ``bcall``: one function over many items, concurrently, on a task group."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio

from lionagi.errors import ConfigurationError

__all__ = ["alcall", "bcall"]

_UNSET: Any = object()


async def alcall(
    input_: Any,
    func: Callable[..., Any],
    /,
    *,
    max_concurrent: int | None = None,
    retry_attempts: int = 0,
    retry_initial_delay: float = 0,
    retry_delay: float | None = None,
    retry_backoff: float = 1,
    retry_default: Any = _UNSET,
    retry_timeout: float | None = None,
    delay_before_start: float = 0,
    throttle_period: float | None = None,
    return_exceptions: bool = False,
    input_flatten: bool = False,
    input_dropna: bool = False,
    input_unique: bool = False,
    output_flatten: bool = False,
    output_dropna: bool = False,
    output_unique: bool = False,
    **kwargs: Any,
) -> list[Any]:
    """Call ``func(item, **kwargs)`` for each item; return the results in input order.

    ``func`` may be async or sync (a sync function runs in a worker thread). At most
    ``max_concurrent`` calls run at once (None: no limit), started ``throttle_period`` seconds
    apart after ``delay_before_start``. A call that raises is retried ``retry_attempts`` more
    times, waiting ``retry_initial_delay`` (alias ``retry_delay``) seconds, multiplied by
    ``retry_backoff`` after each retry; ``retry_timeout`` bounds each attempt (a timeout is a
    ``TimeoutError``, retried like any failure). When the retries are spent the call's result
    is ``retry_default`` if given. ``input_flatten``/``input_dropna``/``input_unique`` (and the
    ``output_`` ones) flatten nested lists, drop ``None`` and drop repeats.

    Concurrency contract: all calls are tasks of one task group inside this call. The first
    failure cancels the calls still running and is raised as itself (not in an exception
    group), unless ``return_exceptions=True``: then each failure takes its item's place in the
    result and the rest go on. Cancelling the caller cancels every call; a sync call in a
    thread is waited for, not abandoned. Cancellation is never retried or returned.
    """
    _check(max_concurrent, retry_attempts, retry_backoff, retry_timeout)
    if not callable(func):
        raise ConfigurationError(f"alcall: func must be callable, got {type(func).__name__}")
    if retry_delay is not None:
        if retry_initial_delay:
            raise ConfigurationError("alcall: pass retry_initial_delay or retry_delay, not both")
        retry_initial_delay = retry_delay
    items = _normalize(input_, flatten=input_flatten, dropna=input_dropna, unique=input_unique)
    retry = _Retry(retry_attempts, retry_initial_delay, retry_backoff, retry_default, retry_timeout)
    calls = _Calls(func, kwargs, len(items), retry, return_exceptions, max_concurrent)
    if delay_before_start:
        await anyio.sleep(delay_before_start)
    out = await calls.run(items, throttle_period)
    return _normalize(out, flatten=output_flatten, dropna=output_dropna, unique=output_unique)


@dataclass(frozen=True, slots=True)
class _Retry:
    """How :func:`alcall` retries one call: ``attempts`` more times after a failure, waiting
    ``delay`` seconds (times ``backoff`` after each retry), each attempt bounded by ``timeout``;
    when the retries are spent the result is ``default`` if given."""

    attempts: int
    delay: float
    backoff: float
    default: Any
    timeout: float | None

    async def run(self, call: Callable[[], Awaitable[Any]]) -> Any:
        failures = 0
        delay = self.delay
        while True:
            try:
                with anyio.fail_after(self.timeout):  # None: no deadline
                    return await call()
            except Exception:
                failures += 1
                if failures > self.attempts:
                    if self.default is not _UNSET:
                        return self.default
                    raise
                if delay:
                    await anyio.sleep(delay)
                    delay *= self.backoff


class _Calls:
    """One :func:`alcall`: its calls, their retries, and their results in input order."""

    def __init__(
        self,
        func: Callable[..., Any],
        kwargs: dict[str, Any],
        count: int,
        retry: _Retry,
        return_exceptions: bool,
        max_concurrent: int | None,
    ) -> None:
        self.func = func
        self.kwargs = kwargs
        self.is_async = _is_async(func)
        self.retry = retry
        self.return_exceptions = return_exceptions
        self.limiter = None if max_concurrent is None else anyio.CapacityLimiter(max_concurrent)
        self.out: list[Any] = [None] * count
        self.failure: BaseException | None = None

    async def run(self, items: list[Any], throttle_period: float | None) -> list[Any]:
        async with anyio.create_task_group() as group:
            for index, item in enumerate(items):
                if self.limiter is not None:
                    await self.limiter.acquire_on_behalf_of(index)
                group.start_soon(self.worker, index, item, group)
                if throttle_period and index < len(items) - 1:
                    await anyio.sleep(throttle_period)
        if self.failure is not None:
            raise self.failure
        return self.out

    async def call(self, item: Any) -> Any:
        if self.is_async:
            return await self.func(item, **self.kwargs)
        return await anyio.to_thread.run_sync(functools.partial(self.func, item, **self.kwargs))

    async def worker(self, index: int, item: Any, group: anyio.abc.TaskGroup) -> None:
        try:
            self.out[index] = await self.retry.run(functools.partial(self.call, item))
        except Exception as exc:
            if self.return_exceptions:
                self.out[index] = exc
            elif self.failure is None:
                self.failure = exc
                group.cancel_scope.cancel()
        finally:
            if self.limiter is not None:
                self.limiter.release_on_behalf_of(index)


async def bcall(
    input_: Any,
    func: Callable[..., Any],
    /,
    batch_size: int,
    **kwargs: Any,
) -> AsyncGenerator[list[Any], None]:
    """:func:`alcall` over consecutive batches of ``batch_size`` items, yielding each batch's
    results in order (the keywords are :func:`alcall`'s).

    Concurrency contract: each batch runs and ends inside one ``__anext__``; no task group is
    open while a batch is handed out, so closing the generator between batches is safe.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigurationError(f"bcall: batch_size must be a positive int, got {batch_size!r}")
    items = _normalize(input_, flatten=True, dropna=True, unique=False)
    for start in range(0, len(items), batch_size):
        yield await alcall(items[start : start + batch_size], func, **kwargs)


def _is_int_from(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _check(
    max_concurrent: int | None, attempts: int, backoff: float, timeout: float | None
) -> None:
    if max_concurrent is not None and not _is_int_from(max_concurrent, 1):
        raise ConfigurationError(
            f"alcall: max_concurrent must be a positive int or None, got {max_concurrent!r}"
        )
    if not _is_int_from(attempts, 0):
        raise ConfigurationError(f"alcall: retry_attempts must be an int >= 0, got {attempts!r}")
    if backoff <= 0:
        raise ConfigurationError(f"alcall: retry_backoff must be > 0, got {backoff!r}")
    if timeout is not None and timeout <= 0:
        raise ConfigurationError(f"alcall: retry_timeout must be > 0 or None, got {timeout!r}")


def _is_async(func: Callable[..., Any]) -> bool:
    target = func.func if isinstance(func, functools.partial) else func
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - an async __call__ method
    )


def _normalize(value: Any, *, flatten: bool, dropna: bool, unique: bool) -> list[Any]:
    if isinstance(value, str | bytes | dict) or not isinstance(value, Iterable):
        items = [value]
    else:
        items = list(value)
    if flatten:
        items = list(_flatten(items))
    if dropna:
        items = [item for item in items if item is not None]
    return _unique(items) if unique else items


def _unique(items: list[Any]) -> list[Any]:
    """``items`` without repeats, first occurrence kept (unhashable ones compared by ==)."""
    kept: list[Any] = []
    seen: set[Any] = set()
    for item in items:
        try:
            if item in seen:
                continue
            seen.add(item)
        except TypeError:  # unhashable: compare by equality
            if item in kept:
                continue
        kept.append(item)
    return kept


def _flatten(items: Iterable[Any]) -> Iterable[Any]:
    for item in items:
        if isinstance(item, list):
            yield from _flatten(item)
        else:
            yield item
