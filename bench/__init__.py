"""Benchmarks (not tests)."""
