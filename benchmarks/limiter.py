"""See :mod:`benchmarks._resilience`."""

from benchmarks._resilience import overhead_scenario as run

__all__ = ["run"]
