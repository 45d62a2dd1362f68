"""``fabriccheck topology import --nvlink-smi``: NVLink domains from every tray's saved
``nvidia-smi -q`` (tests/fixtures/nvl72/smi-trays: four GB200 trays named by host, two fabric
clusters) written into the topology YAML, through the real CLI; bad input is one line naming the
file, the field and what to do (exit 2)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.topology import load_topology
from fabriccheck.topology.discovery.nvlink_smi import host_of
from tests.conftest import REPO

NVL = REPO / "tests" / "fixtures" / "nvl72"
TRAYS = NVL / "smi-trays"
FABRIC = REPO / "tests" / "fixtures" / "routes" / "ibnetdiscover_fattree_2x2.txt"
H200 = NVL / "nvidia-smi-q-h200-zero-cluster.txt"


def cli(*args: str):
    return CliRunner().invoke(app, ["topology", "import", *map(str, args)])


def one_line_error(result) -> str:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def copy_trays(dst, **renames):
    dst.mkdir()
    for f in TRAYS.iterdir():
        shutil.copy(f, dst / renames.get(f.name, f.name))
    return dst


def test_imported_fabric_gets_its_nvlink_domains(tmp_path):
    out = tmp_path / "fabric.yaml"
    result = cli("--ibnetdiscover", FABRIC, "--nvlink-smi", TRAYS, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "warning" not in result.stderr
    topo = load_topology(out)
    assert {n: d.trays for n, d in topo.domains.items()} == {
        "rack-0": ("gpu-01", "gpu-02"), "rack-1": ("gpu-03", "gpu-04")}
    d = topo.domains["rack-0"]
    assert (d.gpus_per_tray, d.switch_trays, d.chips_per_switch_tray, d.ports_per_gpu) == (
        4, 9, 2, 18)
    assert topo.gpus_per_node == 4 and topo.nodes["gpu-03"].gpus == 4  # from the trays
    assert len(topo.links) == 8  # the fabric is the import's, unchanged


def test_domains_are_added_to_an_existing_topology_as_a_subprocess(tmp_path):
    base = tmp_path / "fabric.yaml"
    assert cli("--ibnetdiscover", FABRIC, "--gpus-per-node", 4, "-o", base).exit_code == 0
    assert load_topology(base).domains == {}
    run = subprocess.run([sys.executable, "-m", "fabriccheck", "topology", "import",
                          "--topology", str(base), "--nvlink-smi", str(TRAYS / "gpu-01.txt"),
                          "--nvlink-smi", str(TRAYS / "gpu-02.txt")],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(base.read_text(encoding="utf-8").rstrip("\n") + "\n")
    assert run.stdout.endswith('trays: ["gpu-01", "gpu-02"], gpus_per_tray: 4, switch_trays: 9, '
                               'chips_per_switch_tray: 2, ports_per_gpu: 18}\n')
    (tmp_path / "with.yaml").write_text(run.stdout, encoding="utf-8")
    shown = CliRunner().invoke(app, ["topology", "show", str(tmp_path / "with.yaml"), "--json"])
    assert json.loads(shown.stdout)["nvlink_domains"][0]["trays"] == ["gpu-01", "gpu-02"]


def test_a_tray_outside_any_domain_is_a_warning_naming_its_file(tmp_path):
    trays = copy_trays(tmp_path / "smi")
    shutil.copy(H200, trays / "gpu-04.txt")  # an HGX: an all-zero cluster
    result = cli("--ibnetdiscover", FABRIC, "--nvlink-smi", trays)
    assert result.exit_code == 0, result.stderr
    assert f"{trays / 'gpu-04.txt'}: Fabric / ClusterUUID: no NVLink cluster" in result.stderr
    assert '"rack-1", trays: ["gpu-03"]' in result.stdout


@pytest.mark.parametrize("case", ["missing", "empty", "not-smi", "twice", "stranger",
                                  "gpus", "no-domain", "has-domains", "topology-alone"])
def test_bad_input_is_one_line_naming_file_field_and_fix(tmp_path, case):
    smi, extra = TRAYS, ["--ibnetdiscover", FABRIC]
    if case == "missing":
        smi = tmp_path / "nowhere"
        want = [f"{smi}: no such file or folder", "per-tray nvidia-smi -q"]
    elif case == "empty":
        smi = tmp_path / "smi"
        smi.mkdir()
        want = [f"{smi}: the folder holds no file", "nvidia-smi -q > node-001.txt"]
    elif case == "not-smi":
        smi = copy_trays(tmp_path / "smi")
        (smi / "gpu-02.txt").write_text("GPU 0: NVIDIA GB200 (UUID: GPU-1)\n")
        want = [f"{smi / 'gpu-02.txt'}:Attached GPUs: not nvidia-smi -q output", "<host>.txt"]
    elif case == "twice":
        smi = copy_trays(tmp_path / "smi")
        shutil.copy(TRAYS / "gpu-01.txt", smi / "gpu-01.log")
        want = ["file name: a second file for host 'gpu-01'", "one file per tray"]
    elif case == "stranger":
        smi = copy_trays(tmp_path / "smi", **{"gpu-02.txt": "gpu-09.txt"})
        want = [f"{smi / 'gpu-09.txt'}:file name: host 'gpu-09' is not a node of topology",
                "name each file after its host"]
    elif case == "gpus":
        extra += ["--gpus-per-node", "8"]
        want = [f"{TRAYS / 'gpu-01.txt'}:Attached GPUs: gpu-01 has 4 GPU(s) in the fabric",
                "the topology gives the node 8", "--gpus-per-node"]
    elif case == "no-domain":
        smi = tmp_path / "smi"
        smi.mkdir()
        shutil.copy(H200, smi / "gpu-01.txt")
        want = [f"{smi}:Fabric / ClusterUUID: no NVLink domain in 1 file(s)", "Completed"]
    elif case == "has-domains":
        extra = ["--topology", "gb200-nvl72-8"]
        want = ["gb200-nvl72-8.yaml:nvlink_domains: topology 'gb200-nvl72-8' has NVLink "
                "domains already", "remove nvlink_domains"]
    else:
        result = cli("--topology", "roce-rail-64")
        assert "give --nvlink-smi DIR too" in one_line_error(result)
        return
    line = one_line_error(cli(*extra, "--nvlink-smi", smi))
    for words in want:
        assert words in line, line


def test_files_are_named_by_host():
    assert host_of(TRAYS / "gpu-01.txt") == "gpu-01"
    assert [host_of(p) for p in map(type(TRAYS), ("a.log", "b.out", "c.q", "d", ".txt"))] == [
        "a", "b", "c", "d", ".txt"]
    assert host_of(type(TRAYS)("gb-07.rack2.example")) == "gb-07.rack2.example"
