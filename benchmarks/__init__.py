"""Benchmark commands: they print measured figures and write CSV/PNG; no assertions."""
