"""Reliability suites: cancellation sweeps, faults, load, bad input and secrets."""
