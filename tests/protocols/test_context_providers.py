"""Context provider registry: ordering, caps, budget, containment, concurrency, cancellation."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lionagi.errors import ConfigurationError
from lionagi.protocols.context_providers import (
    ContextProvider,
    ContextProviderRegistry,
    DuplicateProviderError,
    ProviderNotFoundError,
    ProviderReport,
)
from lionagi.protocols.messages import Instruction
from lionagi.protocols.tokens import (
    ApproxTokenCounter,
    TokenCounter,
    get_default_counter,
    set_default_counter,
)

INSTRUCTION = Instruction(instruction="what is on my calendar?")
BRANCH = object()


def fixed(text: object) -> Any:
    """An async provider function that always returns ``text``."""

    async def provider(branch: Any, instruction: Instruction) -> Any:
        return text

    return provider


class WordCounter:
    """One token per whitespace-separated word; truncation keeps whole words."""

    def count(self, text: str) -> int:
        return len(text.split())

    def truncate(self, text: str, max_tokens: int) -> str:
        words = text.split()
        return text if len(words) <= max_tokens else " ".join(words[:max_tokens])


def words(n: int, word: str = "w") -> str:
    return " ".join(f"{word}{i}" for i in range(n))


# --- token counting -------------------------------------------------------------------------


def test_approx_counter_counts_words_punctuation_and_non_ascii() -> None:
    counter = ApproxTokenCounter()
    assert counter.count("") == 0
    assert counter.count("   \n\t ") == 0
    assert counter.count("cat") == 1
    assert counter.count("elephant") == 2  # four letters per token
    assert counter.count("Hi, you!") == 4  # Hi , you !
    assert counter.count("日本語") == 3  # every non-ASCII character is one token
    assert isinstance(counter, TokenCounter)


def test_approx_counter_truncate_keeps_a_prefix_within_the_limit() -> None:
    counter = ApproxTokenCounter()
    assert counter.truncate("one two three four", 2) == "one two"
    assert counter.truncate("one two  ", 2) == "one two  "  # fits: returned unchanged
    assert counter.truncate("anything", 0) == ""
    assert counter.truncate(" \r\n", 0) == " \r\n"  # no visible token: it already fits
    with pytest.raises(ValueError, match="max_tokens"):
        counter.truncate("x", -1)


@given(st.text(), st.integers(min_value=0, max_value=50))
def test_approx_counter_truncate_properties(text: str, limit: int) -> None:
    counter = ApproxTokenCounter()
    cut = counter.truncate(text, limit)
    assert text.startswith(cut)
    assert counter.count(cut) == min(limit, counter.count(text))
    assert counter.truncate(text, counter.count(text)) == text


def test_default_counter_is_pluggable_and_restorable() -> None:
    original = get_default_counter()
    assert isinstance(original, ApproxTokenCounter)
    custom = WordCounter()
    previous = set_default_counter(custom)
    try:
        assert previous is original
        assert get_default_counter() is custom
        assert ContextProviderRegistry().counter is custom
    finally:
        set_default_counter(None)
    assert isinstance(get_default_counter(), ApproxTokenCounter)
    with pytest.raises(ConfigurationError, match="count"):
        set_default_counter(object())  # type: ignore[arg-type]


# --- registration ---------------------------------------------------------------------------


def test_names_default_to_name_attribute_then_class_or_function_name() -> None:
    class Clock:
        async def provide(self, branch: Any, instruction: Instruction) -> str | None:
            return "now"

    class Memory:
        name = "long-term-memory"

        async def provide(self, branch: Any, instruction: Instruction) -> str | None:
            return "remembered"

    class Callable_:
        async def __call__(self, branch: Any, instruction: Instruction) -> str | None:
            return "called"

    async def profile(branch: Any, instruction: Instruction) -> str | None:
        return "profile"

    registry = ContextProviderRegistry()
    assert isinstance(Clock(), ContextProvider)
    assert registry.register(Clock()) == "Clock"
    assert registry.register(Memory()) == "long-term-memory"
    assert registry.register(profile) == "profile"
    assert registry.register(Callable_()) == "Callable_"
    assert registry.register(profile, name="profile-2") == "profile-2"
    assert registry.names == ("Clock", "long-term-memory", "profile", "Callable_", "profile-2")
    assert len(registry) == 5
    assert registry
    assert "profile" in registry


def test_duplicate_name_is_rejected_with_a_clear_error() -> None:
    registry = ContextProviderRegistry()
    registry.register(fixed("a"), name="docs")
    with pytest.raises(DuplicateProviderError, match="'docs' is already registered") as info:
        registry.register(fixed("b"), name="docs")
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ConfigurationError)
    assert registry.names == ("docs",)


def test_unregister() -> None:
    registry = ContextProviderRegistry()
    assert not registry
    registry.register(fixed("a"), name="a")
    registry.register(fixed("b"), name="b")
    registry.unregister("a")
    assert registry.names == ("b",)
    with pytest.raises(ProviderNotFoundError, match="no context provider named 'a'") as info:
        registry.unregister("a")
    assert isinstance(info.value, KeyError)
    assert registry.register(fixed("a2"), name="a") == "a"  # the name is free again
    assert len(registry) == 2


@pytest.mark.parametrize("budget", [0, -5, 1.5, True, "100"])
def test_invalid_budget_is_a_configuration_error(budget: Any) -> None:
    with pytest.raises(ConfigurationError, match="budget"):
        ContextProviderRegistry(budget)


@pytest.mark.parametrize("cap", [0, -1, 2.0, False])
def test_invalid_cap_is_a_configuration_error(cap: Any) -> None:
    registry = ContextProviderRegistry()
    with pytest.raises(ConfigurationError, match="max_tokens"):
        registry.register(fixed("a"), max_tokens=cap)
    assert not registry


def test_invalid_providers_are_rejected() -> None:
    class Provider:
        async def provide(self, branch: Any, instruction: Instruction) -> str | None:
            return "x"

    def sync_provider(branch: Any, instruction: Instruction) -> str:
        return "x"

    registry = ContextProviderRegistry()
    with pytest.raises(ConfigurationError, match="must be async"):
        registry.register(sync_provider)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="register an instance"):
        registry.register(Provider)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="neither"):
        registry.register("not a provider")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="priority"):
        registry.register(fixed("x"), priority="high")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="name"):
        registry.register(fixed("x"), name="")
    with pytest.raises(ConfigurationError, match="token counter"):
        ContextProviderRegistry(counter=object())  # type: ignore[arg-type]
    assert not registry


# --- gather ---------------------------------------------------------------------------------


async def test_empty_registry_gives_an_empty_report() -> None:
    report = await ContextProviderRegistry().gather(BRANCH, INSTRUCTION)
    assert report == ProviderReport()
    assert report.tokens == 0


async def test_providers_receive_branch_and_instruction() -> None:
    seen: list[tuple[Any, Instruction]] = []

    async def record(branch: Any, instruction: Instruction) -> str:
        seen.append((branch, instruction))
        return "ok"

    registry = ContextProviderRegistry()
    registry.register(record)
    await registry.gather(BRANCH, INSTRUCTION)
    assert seen == [(BRANCH, INSTRUCTION)]


async def test_blocks_are_ordered_by_priority_then_registration() -> None:
    registry = ContextProviderRegistry()
    registry.register(fixed("low"), name="low", priority=-1)
    registry.register(fixed("tie-first"), name="tie-first", priority=5)
    registry.register(fixed("high"), name="high", priority=10)
    registry.register(fixed("tie-second"), name="tie-second", priority=5)
    registry.register(fixed("default"), name="default")

    report = await registry.gather(BRANCH, INSTRUCTION)

    assert report.fired == ("high", "tie-first", "tie-second", "default", "low")
    assert report.blocks == ("high", "tie-first", "tie-second", "default", "low")
    assert report.skipped == report.degraded == report.dropped == ()
    assert report.failed == {}
    counter = ApproxTokenCounter()
    assert report.tokens == sum(counter.count(block) for block in report.blocks)


async def test_per_provider_cap_truncates_and_marks_degraded() -> None:
    registry = ContextProviderRegistry(counter=WordCounter())
    registry.register(fixed(words(10, "long")), name="long", max_tokens=3, priority=1)
    registry.register(fixed(words(3, "exact")), name="exact", max_tokens=3)

    report = await registry.gather(BRANCH, INSTRUCTION)

    assert report.blocks == ("long0 long1 long2", "exact0 exact1 exact2")
    assert report.fired == ("long", "exact")
    assert report.degraded == ("long",)
    assert report.dropped == ()
    assert report.tokens == 6


async def test_budget_drops_the_lowest_priorities() -> None:
    registry = ContextProviderRegistry(budget=10, counter=WordCounter())
    registry.register(fixed(words(4)), name="small-last", priority=0)
    registry.register(fixed(words(6)), name="first", priority=3)
    registry.register(fixed(words(6)), name="too-big", priority=2)

    report = await registry.gather(BRANCH, INSTRUCTION)

    # "too-big" does not fit in the 4 tokens left; everything below it goes too, even though
    # "small-last" alone would fit, so the dropped set is always the lowest priorities.
    assert report.fired == ("first",)
    assert report.dropped == ("too-big", "small-last")
    assert report.degraded == ()
    assert report.tokens == 6


async def test_blocks_that_exactly_fill_the_budget_are_kept() -> None:
    registry = ContextProviderRegistry(budget=10, counter=WordCounter())
    registry.register(fixed(words(6)), name="a", priority=1)
    registry.register(fixed(words(4)), name="b")

    report = await registry.gather(BRANCH, INSTRUCTION)

    assert report.fired == ("a", "b")
    assert report.dropped == ()
    assert report.tokens == 10


async def test_a_block_larger_than_the_budget_is_truncated_to_it() -> None:
    registry = ContextProviderRegistry(budget=5, counter=WordCounter())
    registry.register(fixed(words(50)), name="huge", priority=1)
    registry.register(fixed("tail"), name="tail")

    report = await registry.gather(BRANCH, INSTRUCTION)

    assert report.blocks == (words(5),)
    assert report.degraded == ("huge",)
    assert report.dropped == ("tail",)
    assert report.tokens == 5


async def test_huge_text_is_capped_with_the_default_counter() -> None:
    registry = ContextProviderRegistry(budget=100)
    registry.register(fixed("word " * 1_000_000), name="flood")

    report = await registry.gather(BRANCH, INSTRUCTION)

    assert report.degraded == ("flood",)
    assert report.tokens == 100
    assert len(report.blocks[0]) < 1000


async def test_failures_are_contained_and_reported() -> None:
    async def broken(branch: Any, instruction: Instruction) -> str:
        raise RuntimeError("index unavailable")

    registry = ContextProviderRegistry()
    registry.register(broken, priority=5)
    registry.register(fixed(42), name="wrong-type", priority=4)
    registry.register(fixed(b"bytes"), name="bytes", priority=3)
    registry.register(fixed("still here"), name="ok")

    report = await registry.gather(BRANCH, INSTRUCTION)

    assert report.fired == ("ok",)
    assert report.blocks == ("still here",)
    assert list(report.failed) == ["broken", "wrong-type", "bytes"]
    assert report.failed["broken"] == "RuntimeError: index unavailable"
    assert "returned int" in report.failed["wrong-type"]
    assert "str or None" in report.failed["wrong-type"]
    assert "returned bytes" in report.failed["bytes"]


async def test_long_error_text_is_capped() -> None:
    async def loud(branch: Any, instruction: Instruction) -> str:
        raise ValueError("x" * 10_000)

    registry = ContextProviderRegistry()
    registry.register(loud)
    report = await registry.gather(BRANCH, INSTRUCTION)
    assert report.failed["loud"].startswith("ValueError: xxx")
    assert len(report.failed["loud"]) <= 500


async def test_counter_failure_is_contained() -> None:
    class BrokenCounter:
        def count(self, text: str) -> int:
            raise ArithmeticError("cannot count")

        def truncate(self, text: str, max_tokens: int) -> str:
            return text

    registry = ContextProviderRegistry(counter=BrokenCounter())
    registry.register(fixed("text"), name="a")
    report = await registry.gather(BRANCH, INSTRUCTION)
    assert report.failed == {"a": "token counter failed: ArithmeticError: cannot count"}
    assert report.blocks == ()


async def test_none_and_blank_results_are_skipped() -> None:
    registry = ContextProviderRegistry()
    registry.register(fixed(None), name="none", priority=2)
    registry.register(fixed(""), name="empty", priority=1)
    registry.register(fixed(" \n\t"), name="blank")
    registry.register(fixed("real"), name="real", priority=-1)

    report = await registry.gather(BRANCH, INSTRUCTION)

    assert report.skipped == ("none", "empty", "blank")
    assert report.fired == ("real",)
    assert report.failed == {}


async def test_providers_run_concurrently() -> None:
    a_ran = anyio.Event()
    b_ran = anyio.Event()

    async def a(branch: Any, instruction: Instruction) -> str:
        a_ran.set()
        await b_ran.wait()  # would deadlock if providers ran one after the other
        return "from a"

    async def b(branch: Any, instruction: Instruction) -> str:
        b_ran.set()
        await a_ran.wait()
        return "from b"

    registry = ContextProviderRegistry()
    registry.register(a)
    registry.register(b)

    report = await registry.gather(BRANCH, INSTRUCTION)

    assert report.blocks == ("from a", "from b")


async def test_registry_counter_overrides_the_default() -> None:
    registry = ContextProviderRegistry(budget=3, counter=WordCounter())
    registry.register(fixed("supercalifragilistic expialidocious words beyond"), name="w")

    report = await registry.gather(BRANCH, INSTRUCTION)

    # The approximation would count many tokens per long word; the word counter counts words.
    assert report.blocks == ("supercalifragilistic expialidocious words",)
    assert report.tokens == 3
    assert report.degraded == ("w",)


async def test_cancellation_propagates_out_of_gather() -> None:
    started = anyio.Event()
    provider_cancelled = False
    gather_cancelled = False
    returned = False
    scopes: list[anyio.CancelScope] = []

    async def hangs(branch: Any, instruction: Instruction) -> str:
        nonlocal provider_cancelled
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            provider_cancelled = True
            raise
        return "never"

    registry = ContextProviderRegistry()
    registry.register(hangs)
    registry.register(fixed("quick"), name="quick")

    async def run() -> None:
        nonlocal gather_cancelled, returned
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            try:
                await registry.gather(BRANCH, INSTRUCTION)
            except anyio.get_cancelled_exc_class():
                gather_cancelled = True
                raise
            returned = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        scopes[0].cancel()

    assert provider_cancelled
    assert gather_cancelled
    assert not returned


async def test_a_provider_catching_exception_does_not_swallow_cancellation() -> None:
    started = anyio.Event()
    scopes: list[anyio.CancelScope] = []
    returned = False

    async def stubborn(branch: Any, instruction: Instruction) -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        except Exception:
            return "swallowed"
        return "never"

    registry = ContextProviderRegistry()
    registry.register(stubborn)

    async def run() -> None:
        nonlocal returned
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await registry.gather(BRANCH, INSTRUCTION)
            returned = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        scopes[0].cancel()

    assert scopes[0].cancel_called
    assert not returned


async def test_registration_changes_during_gather_do_not_affect_it() -> None:
    entered = anyio.Event()
    release = anyio.Event()
    registry = ContextProviderRegistry()

    async def slow(branch: Any, instruction: Instruction) -> str:
        entered.set()
        await release.wait()
        return "slow"

    registry.register(slow)
    reports: list[ProviderReport] = []

    async def run() -> None:
        reports.append(await registry.gather(BRANCH, INSTRUCTION))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await entered.wait()
        registry.register(fixed("late"), name="late")
        release.set()

    assert reports[0].fired == ("slow",)
    assert registry.names == ("slow", "late")


# --- report ---------------------------------------------------------------------------------


async def test_report_serializes_to_json_and_back() -> None:
    async def broken(branch: Any, instruction: Instruction) -> str:
        raise KeyError("missing")

    registry = ContextProviderRegistry(budget=4, counter=WordCounter())
    registry.register(fixed(words(6)), name="big", priority=3)
    registry.register(fixed(None), name="nothing", priority=2)
    registry.register(broken, priority=1)
    registry.register(fixed("x"), name="late")

    report = await registry.gather(BRANCH, INSTRUCTION)
    data = report.to_dict()

    assert json.loads(json.dumps(data)) == data
    assert data == {
        "blocks": [words(4)],
        "fired": ["big"],
        "skipped": ["nothing"],
        "failed": {"broken": "KeyError: 'missing'"},
        "degraded": ["big"],
        "dropped": ["late"],
        "tokens": 4,
    }
    assert ProviderReport.from_dict(data) == report


def test_report_is_frozen_and_accepts_lists() -> None:
    report = ProviderReport(skipped=["a", "b"])
    assert report.skipped == ("a", "b")
    assert report.blocks == ()
    with pytest.raises(ValueError, match="frozen"):
        report.tokens = 3  # type: ignore[misc]
