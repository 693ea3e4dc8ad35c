"""See :mod:`benchmarks._resilience`."""

from benchmarks._resilience import fairness_scenario as run

__all__ = ["run"]
