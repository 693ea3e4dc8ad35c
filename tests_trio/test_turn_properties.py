"""The turn-protocol property test (tests/turn_scenarios.py) on trio's own scheduler.

On trio, Hypothesis seeds the scheduler, so a scenario replays identically; a MockClock with
autojump turns a deadlock into a prompt failure instead of a hang.
"""

from __future__ import annotations

import os

import trio
from hypothesis import HealthCheck, given, settings
from trio.testing import MockClock

from tests.turn_scenarios import Scenario, ScenarioRun, scenarios

# LIONAGI_PROPERTY_EXAMPLES raises the example count for a full-size run (nox -s properties)
EXAMPLES = int(os.environ.get("LIONAGI_PROPERTY_EXAMPLES", "300"))


def play_on_trio(scenario: Scenario) -> ScenarioRun:
    run = ScenarioRun(scenario)
    trio.run(run.main, clock=MockClock(autojump_threshold=0))
    return run


# -- the property ----------------------------------------------------------------------------
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_turn_protocol_invariants_hold_for_random_interleavings(scenario: Scenario) -> None:
    play_on_trio(scenario).assert_invariants()
