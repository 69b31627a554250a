"""Benchmark runners that drive a real service (``python -m federation.bench.submit``).

The policy comparison on the simulator (``federation bench``) lives in ``federation.sim``."""
