"""The turn-protocol property test (tests/turn_scenarios.py) on every backend.

The scenario runner uses anyio only; here each generated scenario runs in its own
``anyio.run`` on asyncio and on trio, with fewer examples than the trio-native suite.
"""

from __future__ import annotations

import os

import anyio
import pytest
from hypothesis import HealthCheck, given, settings

from tests.backends import BACKENDS
from tests.turn_scenarios import Scenario, ScenarioRun, scenarios

# LIONAGI_PROPERTY_EXAMPLES raises the example count for a full-size run (nox -s properties)
EXAMPLES = int(os.environ.get("LIONAGI_PROPERTY_EXAMPLES", "60"))


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_turn_protocol_invariants_hold_on_each_backend(backend: str, scenario: Scenario) -> None:
    run = ScenarioRun(scenario)
    anyio.run(run.main, backend=backend)
    run.assert_invariants()
