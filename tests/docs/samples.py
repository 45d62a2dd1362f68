"""Doc samples that cannot go stale: every marked output sample is regenerated from a real run.

``make docs`` (``python -m tests.docs.samples``) runs the command of every marked sample in
README.md and docs/*.md (the simulator, fixed seeds, a fresh history database each) and writes
what it printed into the block; ``tests/docs/test_doc_samples.py`` runs them again and fails
when a block differs from a fresh run. It lives beside the other doc tools in ``tests/docs/``:
it is not product code (not in the wheel), and the test imports it. Only the standard library.

A sample is a fenced block between two markers; the opening one holds the command::

    <!-- sample: fabriccheck gate 'node-[009-024]' --topology roce-rail-64 --faults F   # exits 1
         stream: stdout
         show: /^faults found/-$
         drop: /^\\s+evidence:/ -->
    ```text
    ...what the command printed...
    ```
    <!-- /sample -->

Each ``sample:`` line is one command (run with bash from the repository root; a block may hold
several, run one after another in the same temporary directory); a trailing ``# exits N``
says the exit code it must give (else 0). In a ``console`` block every command's output
follows its ``$ command`` line; other blocks (``text``) hold only the output. Options, on the
lines after their command:

``stream``   ``both`` (default: stderr and stdout as a terminal shows them), ``stdout``, ``stderr``
``show``     which lines: comma-separated items ``A`` or ``A-B``, where ``A`` is a line number
             (from 1), ``$`` (the last line) or ``/regex/`` (the first line at or after the
             previous item that matches); every run of lines left out is one ``...`` line
``drop``     ``/regex/``: leave out the lines it matches (no ``...``); repeatable
``json``     stdout is JSON: show only these keys (``a b.c``), in that order, ``...`` for the rest
``columns``  the terminal width the command sees (tables wrap to it); default: a pipe (never
             wrapped)

What varies from run to run or machine to machine is handled in two ways. Paths are rewritten
before anything is written: the repository becomes ``...``, the shared fixtures
``../shared/fixtures``, the home directory ``~``; a ``/tmp/...`` path in a command is made a
path in the run's own temporary directory, printed back as ``/tmp/...``.
Wall-clock seconds, run ids, dates and the metrics' duration and timestamp are *masked* when a
block is compared with a fresh run (:data:`VOLATILE`): a block whose masked text is unchanged
is left as it is (``make docs`` does not rewrite it for a new wall time), any other difference
(a test count, a round, a verdict, a name) makes it stale. ``--force`` rewrites every block.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
#: ../shared/fixtures beside the clone, as tests/conftest.py finds it (FABRICCHECK_FIXTURES wins)
SHARED_FIXTURES = Path(
    os.environ.get("FABRICCHECK_FIXTURES", REPO.parent / "shared" / "fixtures")
).resolve()
SHARED_PREFIX = "../shared/fixtures/"
#: a sample whose commands take more CPU seconds than this is listed in :data:`SLOW`
SLOW_S = 10.0
#: commands (by their start) that take more than SLOW_S: their samples are checked in the slow
#: test tier (``make test-long``), not in ``make test``
SLOW = (
    "fabriccheck sweep --topology docs/examples/ib-rail-128.yaml",  # ~18 s: 128 nodes, 15k tests
    "fabriccheck sweep --topology gb200-nvl72-8",  # ~11 s: 144 trays, the domain level too
)
TIMEOUT_S = 300
WIDTH = 100  # JSON samples wrap at this width

OPEN = re.compile(r"^\s*<!--\s*sample:")
CLOSE = re.compile(r"^\s*<!--\s*/sample\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})(?P<lang>[\w+-]*)")
EXITS = re.compile(r"\s+#\s*exits\s+(?P<code>\d+)\b.*$")
OPTION = re.compile(r"^(?P<key>[a-z]+):\s*(?P<value>.*)$")
OPTIONS = ("stream", "show", "drop", "json", "columns")

#: (pattern, placeholder): what a fresh run may print differently, masked before comparing
VOLATILE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bwall \d+(?:\.\d+)? s\b"), "wall ~ s"),
    (re.compile(r"\(\d+(?:\.\d+)? s wall\)"), "(~ s wall)"),
    (re.compile(r"\b\d{8}T\d{6}-[0-9a-f]{6}\b"), "<run id>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"),
     "<date>"),
    (re.compile(r"^(fabriccheck_run_(?:duration|timestamp)_seconds\{[^}]*\}) \S+", re.M),
     r"\1 ~"),
    (re.compile(r'("wall_seconds": )[0-9.e+-]+'), r"\1~"),
)


class SampleError(Exception):
    """A marker that cannot be read, or a command that did not do what the doc says."""


@dataclass(frozen=True)
class Command:
    """One ``sample:`` line and its options."""

    shown: str  # as the doc shows it (with its comment)
    expect: int  # the exit code it must give
    stream: str = "both"
    show: str = ""
    drop: tuple[str, ...] = ()
    json_keys: tuple[str, ...] = ()
    columns: int | None = None

    @property
    def text(self) -> str:
        """The command without its ``# exits N`` comment (as tests/docs/doctool.py reads it)."""
        return EXITS.sub("", self.shown).strip()

    @property
    def slow(self) -> bool:
        return self.text.startswith(SLOW)


@dataclass
class Sample:
    """A marked block: where it is, its commands, and the lines it holds now."""

    doc: Path
    line: int  # 1-based line of the opening marker
    commands: tuple[Command, ...]
    lang: str
    first: int  # 0-based index of the block's first body line
    last: int  # 0-based index of its closing fence (exclusive end of the body)
    body: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.doc.name}:{self.line}"

    @property
    def console(self) -> bool:
        return self.lang == "console"

    @property
    def slow(self) -> bool:
        return any(c.slow for c in self.commands)

    @property
    def needs_shared(self) -> bool:
        return any(SHARED_PREFIX in c.shown for c in self.commands)


# --- reading the markers ------------------------------------------------------------------


def _command(where: str, head: str, opts: list[tuple[str, str]]) -> Command:
    m = EXITS.search(head)
    kw: dict = {"shown": head.strip(), "expect": int(m.group("code")) if m else 0}
    drops: list[str] = []
    for key, value in opts:
        if key == "stream":
            if value not in ("both", "stdout", "stderr"):
                raise SampleError(f"{where}: stream: {value!r} (both, stdout or stderr)")
            kw["stream"] = value
        elif key == "show":
            kw["show"] = value
        elif key == "drop":
            drops.append(_regex(where, value).pattern)
        elif key == "json":
            kw["json_keys"] = tuple(value.split())
        elif key == "columns":
            kw["columns"] = int(value)
    kw["drop"] = tuple(drops)
    return Command(**kw)


def _regex(where: str, value: str) -> re.Pattern[str]:
    value = value.strip()
    if len(value) < 2 or not (value.startswith("/") and value.endswith("/")):
        raise SampleError(f"{where}: a regex is written /like this/, got {value!r}")
    try:
        return re.compile(value[1:-1])
    except re.error as exc:
        raise SampleError(f"{where}: bad regex {value}: {exc}") from exc


def _marker(where: str, text: str) -> tuple[Command, ...]:
    """The commands of a marker's text (``<!--`` and ``-->`` stripped)."""
    commands: list[Command] = []
    head: str | None = None
    opts: list[tuple[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = OPTION.match(line)
        if not m:
            raise SampleError(f"{where}: cannot read marker line {raw.strip()!r}")
        key, value = m.group("key"), m.group("value").strip()
        if key == "sample":
            if head is not None:
                commands.append(_command(where, head, opts))
            head, opts = value, []
        elif key in OPTIONS and head is not None:
            opts.append((key, value))
        else:
            raise SampleError(f"{where}: unknown marker option {key!r} (one of: sample, "
                              f"{', '.join(OPTIONS)})")
    if head is not None:
        commands.append(_command(where, head, opts))
    if not commands or not all(c.text for c in commands):
        raise SampleError(f"{where}: a sample marker needs a command (<!-- sample: CMD -->)")
    return tuple(commands)


def find_samples(doc: Path) -> list[Sample]:
    """Every marked sample of ``doc``, checked for shape (marker, fence, closing marker)."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    found: list[Sample] = []
    i = 0
    while i < len(lines):
        if not OPEN.match(lines[i]):
            i += 1
            continue
        start, where = i, f"{doc.name}:{i + 1}"
        text = lines[i].split("sample:", 1)[1]
        while "-->" not in lines[i]:
            i += 1
            if i == len(lines):
                raise SampleError(f"{where}: the sample marker is never closed with -->")
            text += "\n" + lines[i]
        text = "sample:" + text.split("-->", 1)[0]
        commands = _marker(where, text)
        i += 1
        m = FENCE.match(lines[i]) if i < len(lines) else None
        if not m:
            raise SampleError(f"{where}: a fenced block must follow the sample marker")
        fence, lang, first = m.group("fence"), m.group("lang").lower(), i + 1
        i = first
        while i < len(lines) and not lines[i].strip().startswith(fence):
            i += 1
        if i == len(lines):
            raise SampleError(f"{where}: the sample's block is never closed")
        last = i
        i += 1
        if i >= len(lines) or not CLOSE.match(lines[i]):
            raise SampleError(f"{where}: <!-- /sample --> must follow the sample's block")
        found.append(Sample(doc, start + 1, commands, lang, first, last, lines[first:last]))
        i += 1
    return found


def find_all(docs: Iterable[Path] = DOCS) -> list[Sample]:
    return [s for doc in docs for s in find_samples(doc)]


# --- running a sample ---------------------------------------------------------------------


def _env(tmp: Path, columns: int | None) -> dict[str, str]:
    env = dict(os.environ)
    bindir = Path(sys.executable).parent
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env["FABRICCHECK_DB"] = str(tmp / "history.sqlite")  # a fresh history: no earlier checks
    env.pop("FABRICCHECK_CONFIG", None)  # nobody's config file changes a sample
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    env["PYTHONUNBUFFERED"] = "1"  # stderr and stdout interleave as on a terminal
    env["PYTHONIOENCODING"] = "utf-8"
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env.pop("COLUMNS", None)
    if columns:
        env["COLUMNS"] = str(columns)
    return env


def rewrite(text: str, tmp: Path | None = None) -> str:
    """Machine-specific paths replaced by what every machine prints the same."""
    pairs = [(str(SHARED_FIXTURES), "../shared/fixtures"), (str(REPO), "...")]
    if tmp is not None:
        pairs.insert(0, (str(tmp), "/tmp"))
    home = str(Path.home())
    if len(home) > 1:
        pairs.append((home, "~"))
    for path, short in pairs:
        text = text.replace(path, short)
    return text


class _Partial(dict):
    """A JSON object shown in part: rendered with ``...`` for the keys left out."""


def _select_json(where: str, data: object, keys: tuple[str, ...]) -> _Partial:
    out = _Partial()
    for key in keys:
        src, dst = data, out
        parts = key.split(".")
        for p in parts[:-1]:
            if not isinstance(src, dict) or p not in src:
                raise SampleError(f"{where}: the JSON has no {key!r}")
            src = src[p]
            dst = dst.setdefault(p, _Partial())
        if not isinstance(src, dict) or parts[-1] not in src:
            raise SampleError(f"{where}: the JSON has no {key!r}")
        dst[parts[-1]] = src[parts[-1]]
    return out


def _render(obj: object) -> str:
    if isinstance(obj, _Partial):
        return "{" + ", ".join([f"{json.dumps(k)}: {_render(v)}" for k, v in obj.items()]
                               + ["..."]) + "}"
    return json.dumps(obj, ensure_ascii=False)


def render_json(selected: _Partial, width: int = WIDTH, prefix: str = "{",
                indent: int = 1) -> list[str]:
    """``{"a": 1, "b": [...], ...}`` packed into lines of at most ``width`` where it can: an
    object too long for one line is broken the same way, its lines under its first key."""
    pieces: list[list[str]] = []
    for k, v in selected.items():
        head = f"{json.dumps(k)}: "
        flat = head + _render(v)
        if isinstance(v, _Partial) and indent + len(flat) + 1 > width:
            pieces.append(render_json(v, width, head + "{", indent + len(head) + 1))
        else:
            pieces.append([flat])
    pieces.append(["..."])
    out: list[str] = []
    cur, fresh = prefix, True  # fresh: nothing placed on the current line yet
    for n, piece in enumerate(pieces):
        piece = [*piece[:-1], piece[-1] + ("}" if n == len(pieces) - 1 else ",")]
        if len(piece) == 1 and (fresh or len(cur) + 1 + len(piece[0]) <= width):
            cur, fresh = cur + ("" if fresh else " ") + piece[0], False
            continue
        if not fresh:
            out.append(cur)
            cur = " " * indent
        if len(piece) == 1:
            cur, fresh = cur + piece[0], False
            continue
        out.append(cur + piece[0])
        out.extend(piece[1:-1])
        cur, fresh = piece[-1], False
    out.append(cur)
    return out


def _endpoint(where: str, token: str, lines: list[str], start: int) -> int:
    if token == "$":
        return len(lines) - 1
    if token.isdigit():
        return int(token) - 1
    rx = _regex(where, token)
    for i in range(start, len(lines)):
        if rx.search(lines[i]):
            return i
    raise SampleError(f"{where}: show: no line matches {token} (from line {start + 1})")


ITEM = re.compile(r"\s*(?P<a>/(?:\\.|[^/\\])*/|\d+|\$)"
                  r"(?:\s*-\s*(?P<b>/(?:\\.|[^/\\])*/|\d+|\$))?\s*(?:,|$)")


def select(where: str, lines: list[str], show: str) -> list[str]:
    """The lines ``show`` picks, each run of lines left out as one ``...`` (blank runs kept)."""
    if not show.strip():
        return list(lines)
    picked: list[int] = []
    pos, cursor = 0, 0
    while pos < len(show):
        m = ITEM.match(show, pos)
        if not m or m.end() == pos:
            raise SampleError(f"{where}: show: cannot read {show[pos:]!r}")
        pos = m.end()
        a = _endpoint(where, m.group("a"), lines, cursor)
        b = _endpoint(where, m.group("b"), lines, a) if m.group("b") else a
        if a < cursor or b < a or b >= len(lines):
            raise SampleError(f"{where}: show: {m.group(0).strip(' ,')} is out of order or "
                              f"past the output's {len(lines)} lines")
        picked.extend(range(a, b + 1))
        cursor = b + 1
    out: list[str] = []
    prev = -1
    for i in picked:
        gap = lines[prev + 1:i]
        if gap:
            out.extend(gap if all(not g.strip() for g in gap) else ["..."])
        out.append(lines[i])
        prev = i
    if prev < len(lines) - 1:
        out.append("...")
    return out


def _trim(lines: list[str]) -> list[str]:
    lines = [ln.rstrip() for ln in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_command(where: str, cmd: Command, tmp: Path) -> tuple[list[str], float]:
    """The lines a sample shows for ``cmd`` (run now, in ``tmp``), and the CPU seconds it took
    (exact when one sample runs at a time)."""
    # /tmp/... in a command is the run's own directory (runs at once never share a file), and
    # it is printed back as /tmp/...
    text = cmd.shown.replace(SHARED_PREFIX, f"{SHARED_FIXTURES}/").replace("/tmp/", f"{tmp}/")
    both = cmd.stream == "both" and not cmd.json_keys  # JSON is read from stdout alone
    t0 = _cpu()
    try:
        res = subprocess.run(
            ["bash", "-o", "pipefail", "-c", text], cwd=REPO, env=_env(tmp, cmd.columns),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT if both else subprocess.PIPE,
            timeout=TIMEOUT_S, check=False)  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise SampleError(f"{where}: `{cmd.text}` ran over {TIMEOUT_S} s") from exc
    took = _cpu() - t0
    stdout = res.stdout.decode("utf-8", errors="replace")
    stderr = "" if both else res.stderr.decode("utf-8", errors="replace")
    if res.returncode != cmd.expect:
        raise SampleError(
            f"{where}: `{cmd.text}` exited {res.returncode}, the doc says {cmd.expect} "
            f"(write `# exits N` after the command)\n{(stderr + stdout)[-2000:]}")
    if cmd.json_keys:
        try:
            data = json.loads(stdout)
        except ValueError as exc:
            raise SampleError(f"{where}: json: stdout is not JSON: {stdout[:200]!r}") from exc
        lines = render_json(_select_json(where, data, cmd.json_keys))
    else:
        shown = {"both": stdout, "stdout": stdout, "stderr": stderr}[cmd.stream]
        lines = _trim(rewrite(shown, tmp).splitlines())
    lines = select(where, lines, cmd.show)
    drops = [re.compile(d) for d in cmd.drop]
    lines = [ln for ln in lines if ln == "..." or not any(d.search(ln) for d in drops)]
    return [rewrite(ln, tmp) for ln in lines], took


def generate(sample: Sample, tmp: Path | None = None) -> tuple[list[str], float]:
    """The block body a fresh run gives ``sample``, and the CPU seconds its commands took."""
    own = tmp is None
    tmp = Path(tempfile.mkdtemp(prefix="fc-docs-")) if own else tmp
    try:
        body: list[str] = []
        total = 0.0
        for cmd in sample.commands:
            lines, took = run_command(sample.where, cmd, tmp)
            total += took
            if sample.console:
                body.append(f"$ {cmd.shown}")
            body.extend(lines)
        return body, total
    finally:
        if own:
            shutil.rmtree(tmp, ignore_errors=True)


# --- comparing ----------------------------------------------------------------------------


def mask(lines: Iterable[str]) -> list[str]:
    """The lines with their volatile parts (:data:`VOLATILE`) replaced by placeholders."""
    text = "\n".join(ln.rstrip() for ln in lines)
    for pattern, placeholder in VOLATILE:
        text = pattern.sub(placeholder, text)
    return text.split("\n")


def same(old: list[str], new: list[str]) -> bool:
    """True when ``old`` (the doc's block) says what ``new`` (a fresh run) says."""
    return mask(old) == mask(new)


def diff(old: list[str], new: list[str], where: str = "") -> str:
    return "\n".join(difflib.unified_diff(mask(old), mask(new), f"{where} (the doc)",
                                          f"{where} (a fresh run)", lineterm="", n=1))


# --- make docs ----------------------------------------------------------------------------


@dataclass
class Outcome:
    sample: Sample
    body: list[str] | None = None
    seconds: float = 0.0
    error: str | None = None
    skipped: str | None = None

    @property
    def stale(self) -> bool:
        return self.body is not None and not same(self.sample.body, self.body)


def _one(sample: Sample) -> Outcome:
    if sample.needs_shared and not SHARED_FIXTURES.is_dir():
        return Outcome(sample, skipped=f"shared fixtures not found at {SHARED_FIXTURES}")
    try:
        body, took = generate(sample)
    except SampleError as exc:
        return Outcome(sample, error=str(exc))
    return Outcome(sample, body, took)


def _write(doc: Path, outcomes: list[Outcome], force: bool) -> int:
    """Rewrite ``doc``'s stale (or, with ``force``, every generated) blocks; how many."""
    lines = doc.read_text(encoding="utf-8").splitlines(keepends=True)
    changed = 0
    for o in sorted(outcomes, key=lambda o: o.sample.first, reverse=True):
        if o.body is None or not (force or o.stale) or o.body == o.sample.body:
            continue
        lines[o.sample.first:o.sample.last] = [ln + "\n" for ln in o.body]
        changed += 1
    if changed:
        doc.write_text("".join(lines), encoding="utf-8")
    return changed


def main(argv: list[str] | None = None, log: Callable[[str], None] = print) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.docs.samples", description=(
        "Regenerate (or --check) every marked output sample in README.md and docs/*.md."))
    ap.add_argument("only", nargs="*", help="only samples whose place (README.md:22) or "
                                            "command contains one of these")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a "
                                                         "sample is stale")
    ap.add_argument("--force", action="store_true", help="rewrite every block, also those "
                                                         "whose only change is volatile")
    ap.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("DOCS_JOBS", "1")),
                    help="samples run at once (default 1, or $DOCS_JOBS; one at a time keeps "
                         "the wall times the samples print, and the CPU times, honest)")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        samples = find_all()
    except SampleError as exc:
        log(f"error: {exc}")
        return 1
    if args.only:
        samples = [s for s in samples if any(
            o in s.where or any(o in c.text for c in s.commands) for o in args.only)]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        outcomes = list(pool.map(_one, samples))
    bad = 0
    for o in outcomes:
        s = o.sample
        if o.error:
            bad += 1
            log(f"{s.where:<28} error   {o.error}")
        elif o.skipped:
            log(f"{s.where:<28} skipped {o.skipped}")
        else:
            state = "stale" if o.stale else "ok"
            if o.stale and args.check:
                bad += 1
                log(diff(s.body, o.body or [], s.where))
            slow = "" if s.slow or o.seconds <= SLOW_S or args.jobs > 1 else (
                f"  (over {SLOW_S:.0f} s: add it to SLOW in tests/docs/samples.py)")
            log(f"{s.where:<28} {state:<7} {o.seconds:5.1f} s cpu  {s.commands[0].text[:60]}"
                f"{slow}")
    if not args.check:
        for doc in {o.sample.doc for o in outcomes}:
            n = _write(doc, [o for o in outcomes if o.sample.doc == doc], args.force)
            if n:
                log(f"wrote {n} sample(s) in {doc.relative_to(REPO)}")
    log(f"{len(outcomes)} samples in {time.monotonic() - t0:.0f} s"
        + (f"; {bad} {'stale or failing' if args.check else 'failing'}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
