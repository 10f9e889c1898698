"""Benchmark harness: timing window, statistics, sweeps over batch sizes, results store."""
