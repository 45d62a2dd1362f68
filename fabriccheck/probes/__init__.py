"""Probes: one module per tool; build its command, parse its output (pure)."""

#: the output formats :func:`fabriccheck.probes.detect.parse_text` reads (here, so the CLI can
#: name them without importing every parser)
TOOLS = ("nccl-tests", "perftest", "iperf3", "nccl-log")
