"""Load scenarios at CI size (``python -m benchmarks.reliability`` runs them at full size).

See :mod:`tests.reliability.load` for what each scenario does and checks.
"""

from __future__ import annotations

import pytest

from lionagi.session.signal import Signal
from tests.reliability.load import concurrent_callers, many_branches, sequential_turns

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("seed", [1, 2])
async def test_concurrent_callers_with_cancellations_and_controls(seed: int) -> None:
    report = await concurrent_callers(400, seed=seed)
    assert report.violations == []
    # the mix really happened: completions, cancellations and accepted directives
    assert report.completed > 100
    assert report.cancelled > 20
    assert report.controls_accepted > 5
    assert report.figures.get("break", 0) + report.figures.get("stop", 0) > 0


async def test_many_branches_each_running_several_turns() -> None:
    report = await many_branches(200, 10)
    assert report.violations == []
    assert report.turns == report.completed == 2000


async def test_sequential_turns_hold_no_memory_beyond_the_history() -> None:
    report = await sequential_turns(2000)
    assert report.violations == []
    assert report.turns == report.completed == 2000
    assert report.figures["history bytes per turn"] > 0


async def test_the_memory_check_sees_signals_kept_by_an_observer() -> None:
    kept: list[Signal] = []
    report = await sequential_turns(2000, handler=lambda signal, _: kept.append(signal))
    assert any("beyond the history" in v for v in report.violations)
