"""Context providers: ephemeral text blocks added to one model request.

A provider (memory, retrieved documents, the clock, a user profile...) returns a block of text
for the instruction at hand. The blocks are rendered into the request only and never recorded
in history. A :class:`ContextProviderRegistry` runs every provider concurrently, contains their
failures, and fits the blocks into a token budget by priority; the :class:`ProviderReport` it
returns says what happened to each provider.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import anyio
from pydantic import BaseModel, ConfigDict, Field

from lionagi.errors import (
    ConfigurationError,
    DuplicateProviderError,
    ProviderNotFoundError,
)
from lionagi.protocols.messages import Instruction
from lionagi.protocols.tokens import TokenCounter, get_default_counter

__all__ = [
    "ContextProvider",
    "ContextProviderRegistry",
    "DuplicateProviderError",
    "ProviderFunction",
    "ProviderNotFoundError",
    "ProviderReport",
]

_MAX_ERROR_CHARS = 500


@runtime_checkable
class ContextProvider(Protocol):
    """An object whose ``provide`` returns a context block, or ``None`` for nothing this time."""

    async def provide(self, branch: Any, instruction: Instruction) -> str | None: ...


ProviderFunction: TypeAlias = Callable[[Any, Instruction], Awaitable[str | None]]
"""A plain ``async def f(branch, instruction) -> str | None`` is accepted as a provider too."""


class ProviderReport(BaseModel):
    """What one ``gather`` did with each provider; JSON-serializable through :meth:`to_dict`.

    Every provider name lands in exactly one of ``fired``, ``skipped``, ``failed`` and
    ``dropped``; ``degraded`` is a subset of ``fired``.

    - ``blocks``: the included text, highest priority first; ``fired[i]`` produced ``blocks[i]``.
    - ``skipped``: not invoked, or returned ``None`` or whitespace-only text.
    - ``failed``: name -> error text, for providers that raised or returned a non-string.
    - ``degraded``: included, but truncated to the provider's ``max_tokens`` or to the budget.
    - ``dropped``: produced a block that did not fit in what was left of the budget.
    - ``tokens``: total tokens of ``blocks``, as measured by the registry's counter.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built when used

    blocks: tuple[str, ...] = ()
    fired: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    failed: dict[str, str] = Field(default_factory=dict)
    degraded: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible data (tuples become lists)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProviderReport:
        """Rebuild a report from :meth:`to_dict` output."""
        return cls.model_validate(data)


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    call: ProviderFunction
    priority: int
    max_tokens: int | None
    order: int


@dataclass(frozen=True, slots=True)
class _Outcome:
    kind: Literal["block", "skipped", "failed"]
    text: str = ""
    tokens: int = 0
    truncated: bool = False
    error: str = ""


def _check_limit(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{what} must be a positive int (tokens), got {value!r}")
    return value


def _error_text(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


def _resolve(provider: ContextProvider | ProviderFunction) -> tuple[ProviderFunction, str]:
    """The async callable behind ``provider`` and its default name."""
    if isinstance(provider, type):
        raise ConfigurationError(
            f"context provider {provider.__name__} is a class; register an instance of it"
        )
    own_name = getattr(provider, "name", None)
    if isinstance(provider, ContextProvider):
        call: Any = provider.provide
        default = type(provider).__name__
    elif callable(provider):
        call = provider
        default = getattr(provider, "__name__", None) or type(provider).__name__
    else:
        raise ConfigurationError(
            f"context provider {provider!r} is neither an object with an async provide(branch, "
            "instruction) method nor an async function f(branch, instruction)"
        )
    # An object with ``async def __call__`` counts as an async function.
    is_async = inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(type(call).__call__)
    if not is_async:
        raise ConfigurationError(
            f"context provider {provider!r} must be async: define it with "
            "'async def provide(self, branch, instruction)' or 'async def f(branch, instruction)'"
        )
    name = own_name if isinstance(own_name, str) and own_name else default
    return call, name


class ContextProviderRegistry:
    """Named context providers with a total token budget and optional per-provider caps.

    ``gather`` runs every provider concurrently, then orders blocks by priority (higher first,
    ties in registration order), truncates each to ``min(max_tokens, budget)``, and packs them
    into ``budget`` in that order. The first block that does not fit in the remaining budget is
    dropped together with every lower-priority block, so what goes is always the lowest
    priorities. Without an explicit ``counter`` the process default (see
    :func:`lionagi.protocols.tokens.set_default_counter`) is read at each ``gather``.
    """

    def __init__(self, budget: int = 2000, *, counter: TokenCounter | None = None) -> None:
        self._budget = _check_limit("context provider budget", budget)
        if counter is not None and not isinstance(counter, TokenCounter):
            raise ConfigurationError(
                f"token counter {counter!r} must have count(text) -> int and "
                "truncate(text, max_tokens) -> str methods"
            )
        self._counter = counter
        self._entries: dict[str, _Entry] = {}
        self._next_order = 0

    @property
    def budget(self) -> int:
        """Total tokens all blocks of one request may use."""
        return self._budget

    @property
    def counter(self) -> TokenCounter:
        """The counter ``gather`` measures with: the registry's own, else the process default."""
        return self._counter if self._counter is not None else get_default_counter()

    @property
    def names(self) -> tuple[str, ...]:
        """Registered provider names, in registration order."""
        return tuple(self._entries)

    def register(
        self,
        provider: ContextProvider | ProviderFunction,
        *,
        priority: int = 0,
        max_tokens: int | None = None,
        name: str | None = None,
    ) -> str:
        """Add ``provider`` and return the name it is registered under.

        The name defaults to the provider's ``name`` attribute, else its function or class name.
        ``max_tokens`` caps this provider's block; a longer block is truncated and reported as
        degraded.
        """
        call, default_name = _resolve(provider)
        if name is None:
            name = default_name
        elif not isinstance(name, str) or not name:
            raise ConfigurationError(f"context provider name must be a non-empty str, got {name!r}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ConfigurationError(f"context provider priority must be an int, got {priority!r}")
        if max_tokens is not None:
            _check_limit(f"max_tokens of context provider {name!r}", max_tokens)
        if name in self._entries:
            raise DuplicateProviderError(
                f"a context provider named {name!r} is already registered; pass another "
                f"name=... or call unregister({name!r}) first"
            )
        self._entries[name] = _Entry(name, call, priority, max_tokens, self._next_order)
        self._next_order += 1
        return name

    def unregister(self, name: str) -> None:
        """Remove the provider registered as ``name``."""
        if name not in self._entries:
            raise ProviderNotFoundError(
                f"no context provider named {name!r} is registered; registered: "
                f"{list(self._entries)}"
            )
        del self._entries[name]

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __repr__(self) -> str:
        return f"ContextProviderRegistry(budget={self._budget}, names={list(self._entries)})"

    async def gather(self, branch: Any, instruction: Instruction) -> ProviderReport:
        """Run all providers concurrently and fit their blocks into the budget.

        A provider that raises an ``Exception`` or returns a non-string is reported as failed
        and the others go on. Cancellation is never contained: it cancels every provider and
        propagates out of ``gather``.
        """
        entries = sorted(self._entries.values(), key=lambda e: (-e.priority, e.order))
        counter = self.counter
        outcomes: dict[str, _Outcome] = {}
        async with anyio.create_task_group() as tg:
            for entry in entries:
                tg.start_soon(self._run_one, entry, counter, branch, instruction, outcomes)

        blocks: list[str] = []
        fired: list[str] = []
        skipped: list[str] = []
        failed: dict[str, str] = {}
        degraded: list[str] = []
        dropped: list[str] = []
        remaining = self._budget
        for entry in entries:
            outcome = outcomes[entry.name]
            if outcome.kind == "skipped":
                skipped.append(entry.name)
            elif outcome.kind == "failed":
                failed[entry.name] = outcome.error
            elif dropped or outcome.tokens > remaining:
                dropped.append(entry.name)
            else:
                blocks.append(outcome.text)
                fired.append(entry.name)
                if outcome.truncated:
                    degraded.append(entry.name)
                remaining -= outcome.tokens
        return ProviderReport(
            blocks=tuple(blocks),
            fired=tuple(fired),
            skipped=tuple(skipped),
            failed=failed,
            degraded=tuple(degraded),
            dropped=tuple(dropped),
            tokens=self._budget - remaining,
        )

    async def _run_one(
        self,
        entry: _Entry,
        counter: TokenCounter,
        branch: Any,
        instruction: Instruction,
        outcomes: dict[str, _Outcome],
    ) -> None:
        try:
            result: object = await entry.call(branch, instruction)
        except Exception as exc:
            outcomes[entry.name] = _Outcome("failed", error=_error_text(exc))
            return
        if result is None:
            outcomes[entry.name] = _Outcome("skipped")
            return
        if not isinstance(result, str):
            outcomes[entry.name] = _Outcome(
                "failed",
                error=f"returned {type(result).__name__}; a context provider must return "
                "str or None",
            )
            return
        if not result.strip():
            outcomes[entry.name] = _Outcome("skipped")
            return
        limit = self._budget if entry.max_tokens is None else min(entry.max_tokens, self._budget)
        try:
            # Truncating first keeps huge blocks cheap: the counter stops at the limit.
            text = counter.truncate(result, limit)
            tokens = counter.count(text)
        except Exception as exc:
            outcomes[entry.name] = _Outcome(
                "failed", error=f"token counter failed: {_error_text(exc)}"
            )
            return
        outcomes[entry.name] = _Outcome("block", text, tokens, truncated=text != result)
