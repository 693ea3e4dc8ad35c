"""The benchmark runner works end to end at smoke sizes (a smoke test: nothing here is timed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# A hang guard, not a timing check: the smoke sizes take about a minute on a busy 2-core machine.
@pytest.mark.timeout(600)
def test_quick_run_writes_every_scenario(tmp_path: Path) -> None:
    from benchmarks.__main__ import SCENARIOS

    command = [sys.executable, "-m", "benchmarks", "--quick", "--out", str(tmp_path)]
    done = subprocess.run(
        [*command, "--peer-python", ""],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    document = json.loads((tmp_path / "bench-quick.json").read_text())
    assert document["quick"] is True
    assert document["environment"]["command"].startswith("python -m benchmarks --quick")
    assert document["environment"]["machine"]["cpu_count"] >= 1
    assert set(document["scenarios"]) == set(SCENARIOS)
    for name, scenario in document["scenarios"].items():
        if name == "peers":
            assert "skipped" in scenario  # --peer-python '' turns the peers off
            continue
        assert scenario["rows"], name
        assert all(set(scenario["columns"]) <= set(row) for row in scenario["rows"]), name
        for entry in scenario["targets"]:
            assert {"target", "value", "limit", "met"} <= set(entry), name

    backends = {row["backend"] for row in document["scenarios"]["turn"]["rows"]}
    assert {"asyncio", "trio"} <= backends
    # the first delta's direct paths and the floor run beside the Branch on every backend
    from benchmarks.stream import FLOOR, INTERNAL, PREBUILT

    first = {"first delta, direct", "first delta, Branch.stream", INTERNAL, PREBUILT, FLOOR}
    for backend in backends:
        paths = {
            r["path"] for r in document["scenarios"]["stream"]["rows"] if r["backend"] == backend
        }
        assert first <= paths, backend
    markdown = (tmp_path / "bench-quick.md").read_text()
    assert "## Targets" in markdown
    assert all(f"(`{name}`)" in markdown for name in SCENARIOS)


@pytest.mark.timeout(600)
def test_cold_start_against_a_base_checkout_reports_both_and_their_ratio(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.cold", "--quick", "--base", ".", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cold = json.loads((tmp_path / "cold-quick.json").read_text())["scenarios"]["cold"]
    assert {(row["tree"], row["backend"]) for row in cold["rows"]} == {
        (tree, backend) for tree in ("this", "base") for backend in ("asyncio", "trio")
    }
    for row in cold["rows"]:
        steps = ("import_lionagi_ms", "then_testing_ms", "then_branch_ms", "first_turn_ms")
        assert row["import_to_first_turn_ms"] >= max(row[step] for step in steps)
    (ratios,) = cold["tables"].values()
    assert [row["run"] for row in ratios["rows"]] == [
        "bytecode cached, asyncio",
        "bytecode cached, trio",
    ]
