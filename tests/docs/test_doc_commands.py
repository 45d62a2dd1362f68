"""The docs are true: every command in README.md and docs/ runs and exits as the doc says.

Every ``fabriccheck ...`` command of a fenced ``bash``/``console`` block runs as a subprocess
(the venv's ``fabriccheck`` first on PATH, the repository as cwd, a timeout) and must exit with the
code the doc promises (0, or ``# exits N`` after it); a command that an output sample runs is
checked there instead (``test_doc_samples.py``: its exit code and its output). Blocks that need
a real cluster, root or ``make`` carry ``<!-- doc-test: skip (reason) -->``; their commands are
not run but their subcommands and flags are still checked against the real CLI. Also: every
relative link points at a file, every ``fabriccheck <cmd>`` named anywhere in the docs exists,
and the YAML examples (topology, spec, faults, inventory files) load with the real loaders.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
import yaml

import fabriccheck.cli.main  # noqa: F401  (registers every command module on app)
from fabriccheck.cli.app import app
from tests.conftest import REPO, SHARED_FIXTURES
from tests.docs import samples
from tests.docs.doctool import (
    blocks,
    commands,
    embedded_commands,
    fabriccheck_words,
    inline_commands,
    links,
)

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: pages the newcomer's path links to; they must exist
REQUIRED = ("index.md", "architecture.md", "how-it-finds-faults.md", "topologies.md",
            "test-specs.md", "troubleshooting.md")
BIN = Path(sys.executable).parent
TIMEOUT_S = 60
ALL = [c for doc in DOCS for c in commands(doc)]
RUN = [c for c in ALL if c.skip is None]
#: commands a marked output sample runs (tests/docs/test_doc_samples.py checks their exit code
#: and their output): not run twice
SAMPLED = {(c.text, c.expect) for s in samples.find_all(DOCS) for c in s.commands}


def _cli():
    """The click command tree of the real CLI (typer may vendor its own click: duck-typed)."""
    return typer.main.get_command(app)


def _resolve(words: list[str]):
    """The click command for a subcommand path, and the path that resolved."""
    cmd = _cli()
    used: list[str] = []
    for w in words:
        if not hasattr(cmd, "commands"):
            break
        sub = cmd.commands.get(w)
        if sub is None:
            return None, used + [w]
        cmd, used = sub, used + [w]
    return cmd, used


def _option_names(cmd) -> set[str]:
    names = {"--help"}
    for p in cmd.params:
        if getattr(p, "param_type_name", "") == "option":
            names.update(p.opts)
            names.update(p.secondary_opts)
    return names


def test_docs_exist():
    have = {p.name for p in DOCS}
    missing = [n for n in REQUIRED if n not in have]
    assert not missing, f"docs/ lacks {missing}"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first_block = next(b for b in blocks(REPO / "README.md"))
    first_two = [ln.split("#")[0].strip() for ln in first_block.body[:2]]
    assert first_two == ["make demo", "make test"], "README must open with make demo / make test"
    assert readme.index("make demo") < readme.index("pip install")


def test_relative_links_resolve():
    broken = []
    for doc in DOCS:
        for line, target in links(doc):
            if target and not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(REPO)}:{line}: {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_named_code_paths_exist():
    """`fabriccheck/...`, `tests/...`, `bench/...` paths the docs name are real files or dirs."""
    pattern = re.compile(r"`((?:fabriccheck|tests|bench|topologies|test_specs)/[\w./-]*)`")
    missing = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for path in pattern.findall(line):
                if "." not in path and not path.endswith("/"):
                    continue  # a label such as fabriccheck/host, not a path
                if not (REPO / path.rstrip("/")).exists():
                    missing.append(f"{doc.name}:{n}: {path}")
    assert not missing, "docs name paths that do not exist:\n" + "\n".join(missing)


def test_every_named_command_and_flag_exists():
    """`fabriccheck X Y --flag` anywhere in the docs (run or skipped) exists in the real CLI."""
    problems = []
    mentions = [(c.where, c.text) for c in ALL if c.is_fabriccheck]
    for doc in DOCS:
        mentions += [(f"{doc.name}:{n}", text) for n, text in inline_commands(doc)]
        mentions += embedded_commands(doc)
    assert len(mentions) > 20, "the docs should show the CLI"
    for where, text in mentions:
        words, flags = fabriccheck_words(text)
        if not words:
            continue
        cmd, used = _resolve(words)
        if cmd is None:
            problems.append(f"{where}: no command `fabriccheck {' '.join(used)}`: {text}")
            continue
        unknown = [f for f in flags if f not in _option_names(cmd)]
        if unknown:
            problems.append(f"{where}: `fabriccheck {' '.join(used)}` has no {unknown}: {text}")
    assert not problems, "\n".join(problems)


def test_named_commands_listed_in_help():
    """The top-level commands the docs use are the ones `fabriccheck --help` lists."""
    mentions = [c.text for c in ALL if c.is_fabriccheck]
    for doc in DOCS:
        mentions += [text for _, text in inline_commands(doc)]
    used = {fabriccheck_words(t)[0][0] for t in mentions if fabriccheck_words(t)[0]}
    res = subprocess.run([str(BIN / "fabriccheck"), "--help"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "200"}, timeout=TIMEOUT_S, check=False)
    assert res.returncode == 0, res.stderr
    listed = {m.group(1) for m in re.finditer(r"^[^\w-]*([a-z][a-z-]+)\s{2,}", res.stdout, re.M)}
    assert {"gate", "sweep", "bisect", "demo"} <= used
    assert used <= listed, f"not in `fabriccheck --help`: {sorted(used - listed)}"


def test_unmarked_blocks_hold_only_runnable_commands():
    """A block with another command (make, srun, kubectl, pip) must say why it is skipped."""
    bad = [f"{c.where}: {c.text}" for c in RUN if not c.is_fabriccheck]
    assert not bad, ("mark these blocks <!-- doc-test: skip (reason) --> or drop the commands:\n"
                     + "\n".join(bad))


def test_skips_are_rare_and_justified():
    skipped = [b for doc in DOCS for b in blocks(doc) if b.skip]
    assert all(len(b.skip) >= 8 for b in skipped), [b.skip for b in skipped]
    assert len(RUN) >= 2 * len(skipped), "most documented commands must actually run"


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["FABRICCHECK_DB"] = str(tmp / "history.sqlite")
    env["COLUMNS"] = "120"
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    return env


def _earlier_shared(cmd):
    """The first command before ``cmd`` in its block that reads ../shared/fixtures, if any
    (a later command of the block may read the file that one writes)."""
    return next((c for c in ALL if c.doc == cmd.doc and c.block == cmd.block
                 and c.line < cmd.line and "../shared/fixtures/" in c.text), None)


@pytest.fixture(scope="session")
def block_tmp(tmp_path_factory):
    """One directory per doc block, standing in for ``/tmp`` in its commands: a block's later
    command reads what an earlier one wrote there (the commands of a block run in order on one
    xdist worker: tests/conftest.py), and no two blocks, workers or test runs share a file."""
    dirs: dict[tuple[str, int], Path] = {}

    def get(cmd) -> Path:
        key = (cmd.doc.name, cmd.block)
        if key not in dirs:
            dirs[key] = tmp_path_factory.mktemp(f"{cmd.doc.stem}-{cmd.block}-tmp")
        return dirs[key]

    return get


def _run(text: str, tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-o", "pipefail", "-c", text], cwd=REPO, env=_env(tmp),
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def _in_block_tmp(cmd, tmp: Path) -> str:
    text = cmd.text.replace("../shared/fixtures/", f"{SHARED_FIXTURES}/")
    return text.replace("/tmp/", f"{tmp}/")


_SET_UP: set[tuple[str, int]] = set()


def _set_up_block(cmd, tmp: Path, history: Path) -> None:
    """Run, once per block, the block's commands before ``cmd`` that this test does not run
    itself (their output is checked as a sample, tests/docs/test_doc_samples.py): a later
    command reads the files they write."""
    if (cmd.doc.name, cmd.block) in _SET_UP:
        return
    _SET_UP.add((cmd.doc.name, cmd.block))
    for c in RUN:
        if (c.doc == cmd.doc and c.block == cmd.block and c.line < cmd.line
                and c.is_fabriccheck and (c.text, c.expect) in SAMPLED):
            res = _run(_in_block_tmp(c, tmp), history)
            assert res.returncode == c.expect, (
                f"{c.where}: `{c.text}` (run first: {cmd.where} follows it) exited "
                f"{res.returncode}, the doc says {c.expect}\nstderr: {res.stderr[-1500:]}")


@pytest.mark.parametrize("cmd", [c for c in RUN if c.is_fabriccheck
                                 and (c.text, c.expect) not in SAMPLED], ids=lambda c: c.where)
def test_documented_command_runs(cmd, tmp_path, block_tmp):
    text = _in_block_tmp(cmd, block_tmp(cmd))
    if "../shared/fixtures/" in cmd.text and not SHARED_FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {SHARED_FIXTURES}")
    needs = _earlier_shared(cmd)
    if needs and not SHARED_FIXTURES.is_dir():  # it reads what a skipped command would write
        pytest.skip(f"{cmd.where}: follows {needs.where}, which needs the shared fixtures "
                    f"(not found at {SHARED_FIXTURES})")
    assert shutil.which("fabriccheck", path=str(BIN)), "fabriccheck is not installed in the venv"
    try:
        _set_up_block(cmd, block_tmp(cmd), tmp_path)
        res = _run(text, tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{cmd.where}: `{cmd.text}` ran over {TIMEOUT_S} s")
    assert res.returncode == cmd.expect, (
        f"{cmd.where}: `{cmd.text}` exited {res.returncode}, the doc says {cmd.expect}\n"
        f"stderr: {res.stderr[-1500:]}\nstdout: {res.stdout[-800:]}")


def _yaml_examples() -> list[tuple[str, dict]]:
    found = []
    for doc in DOCS:
        for b in blocks(doc):
            if b.lang not in ("yaml", "yml") or b.skip:
                continue
            try:
                data = yaml.safe_load("\n".join(b.body))
            except yaml.YAMLError as exc:
                raise AssertionError(f"{doc.name}:{b.line}: YAML does not parse: {exc}") from exc
            if isinstance(data, dict):
                found.append((f"{doc.name}:{b.line}", data))
    return found


@pytest.mark.parametrize("where,data", _yaml_examples(), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_yaml_examples_load(where, data, tmp_path):
    """Whole-file YAML examples (topology, spec, faults, inventory) load with the real loaders."""
    path = tmp_path / "example.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    if "hosts" in data and isinstance(data["hosts"], dict):
        from fabriccheck.inventory.file import load_inventory

        assert load_inventory(str(path)).nodes(), where
    elif "probes" in data:
        from fabriccheck.specs import load_spec

        assert load_spec(str(path)).probes, where
    elif "generator" in data or "switches" in data:
        from fabriccheck.topology import load_topology

        assert load_topology(path).nodes, where
    elif "faults" in data and isinstance(data["faults"], list):
        from fabriccheck.faults import FaultSet

        assert FaultSet.from_dict(data, source=where) is not None
    else:
        pytest.skip(f"{where}: a fragment, not a whole file")
