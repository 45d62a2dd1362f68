"""Probes: one module per tool; build its command, parse its output (pure)."""
