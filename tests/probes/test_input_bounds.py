"""Bounded input for ``fabriccheck parse``: byte cap, stream deadline, binary data, stdin."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.errors import ConfigError
from fabriccheck.probes._input import read_tool_output

IPERF = "[  5]   0.00-10.00  sec  42.8 GBytes  36.7 Gbits/sec  3148   sender\n"


def test_regular_file_over_the_cap(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text(IPERF * 100)
    assert read_tool_output(path, max_bytes=len(IPERF) * 100) == IPERF * 100
    with pytest.raises(ConfigError, match=r"big.txt: more than \d+ bytes: read stopped"):
        read_tool_output(path, max_bytes=len(IPERF) * 10)


@pytest.mark.parametrize("device", ["/dev/urandom", "/dev/zero"])
def test_endless_devices_end_at_once(device):
    if not Path(device).exists():
        pytest.skip(f"no {device}")
    with pytest.raises(ConfigError, match=f"^{device}: binary data"):
        read_tool_output(device)


def test_a_stream_that_never_ends_hits_the_deadline(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # keeps the pipe open, writes a little
    try:
        os.write(writer, IPERF.encode())
        with pytest.raises(ConfigError, match=r"did not end within 0.2 s \(\d+ bytes read\)"):
            read_tool_output(fifo, timeout_s=0.2)
    finally:
        os.close(writer)


def test_stream_that_ends_is_read(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    def write() -> None:
        with open(fifo, "w") as f:
            f.write(IPERF)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert read_tool_output(fifo, timeout_s=10) == IPERF
    finally:
        writer.join(10)


def test_utf16_with_bom_is_text(tmp_path):
    path = tmp_path / "win.txt"
    path.write_bytes(IPERF.encode("utf-16"))
    assert read_tool_output(path) == IPERF


def test_cli_one_line_errors_and_stdin(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["parse", "/dev/urandom", "--json"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "error: /dev/urandom: binary data, not tool output (give the text a tool printed)"]
    r = runner.invoke(app, ["parse", "-", "--json"], input=IPERF)
    assert r.exit_code == 0 and '"sent_gbps": 36.7' in r.stdout
    big = tmp_path / "big.txt"
    big.write_text(IPERF * 40000)  # ~2.7 MiB
    r = runner.invoke(app, ["parse", str(big), "--max-mb", "1"])
    assert r.exit_code == 2 and "more than 1 MiB" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
