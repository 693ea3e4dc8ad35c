"""Benchmarks of lionagi's turn driver: overhead, streaming, contention, scale, peers, memory.

Run ``python -m benchmarks`` (every scenario) or ``python -m benchmarks turn long --quick``;
``python -m benchmarks.peers`` compares against the upstream release and pydantic-ai in their
own environment (``nox -s bench_peers``). Results land in ``benchmarks/results/`` as JSON and a
markdown table, with the machine, the package versions and the command that produced them.
Timing lives here and never in the tests.
"""
