"""Benchmarks of the real stack (not part of the test suite); see bench/run.py."""
