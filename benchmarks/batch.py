"""See :mod:`benchmarks._resilience`."""

from benchmarks._resilience import batch_scenario as run

__all__ = ["run"]
