"""Reading the Markdown docs: fenced command blocks, their markers, inline commands and links.

Conventions the docs follow (docs/index.md, "How these docs are tested"):

* Fenced ``bash`` / ``console`` blocks hold commands. In a ``console`` block a command starts with
  ``$ ``; the lines after it are output. In a ``bash`` block every non-comment line is a command.
  A line ending in ``\\`` continues on the next line.
* A command is expected to exit 0. A trailing comment ``# exits N`` (optionally ``# exits N: why``)
  says it exits N instead.
* ``<!-- doc-test: skip (reason) -->`` on the line(s) just before a block marks a block that needs
  something the tests cannot have (a real Slurm/Kubernetes/Ray cluster, root, ``make``). Its
  commands are not run, but every ``fabriccheck`` subcommand and flag in it is still checked
  against ``--help``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})(?P<lang>[\w+-]*)[^\n]*$")
SKIP = re.compile(r"<!--\s*doc-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->")
EXITS = re.compile(r"\s+#\s*exits\s+(?P<code>\d+)\b.*$")
INLINE = re.compile(r"(?<!`)`(fabriccheck [^`\n]+)`(?!`)")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\((?P<target>[^)\s]+)\)|!\[[^\]\n]*\]\((?P<img>[^)\s]+)\)")


ENV_PREFIX = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=(?:'[^']*'|\"[^\"]*\"|\S*)\s+)+")


def strip_env(command: str) -> str:
    """``SLURM_JOB_NODELIST='n[1-2]' fabriccheck gate`` -> ``fabriccheck gate``."""
    return ENV_PREFIX.sub("", command.strip())


@dataclass(frozen=True)
class Command:
    """One command found in a doc: where it is, its text, the exit code the doc promises."""

    doc: Path
    line: int
    text: str
    expect: int
    skip: str | None  # reason, when the block is marked skip
    block: int = 0  # the line of the block's opening fence (commands of one block share it)

    @property
    def where(self) -> str:
        return f"{self.doc.name}:{self.line}"

    @property
    def is_fabriccheck(self) -> bool:
        """A fabriccheck command, possibly after ``VAR=value`` environment assignments."""
        return strip_env(self.text).split()[:1] == ["fabriccheck"]


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    lang: str
    body: list[str]
    skip: str | None


def blocks(doc: Path) -> list[Block]:
    """Every fenced block of ``doc`` with its language and the skip reason marked before it."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group("fence"), i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        skip = None
        j = start - 1
        while j >= 0 and lines[j].strip() == "":
            j -= 1
        if j >= 0 and (s := SKIP.search(lines[j])):
            skip = s.group("reason").strip()
        found.append(Block(doc, start + 1, m.group("lang").lower(), body, skip))
        i += 1
    return found


def _join(body: list[str], console: bool) -> list[tuple[int, str]]:
    """(offset, command) pairs: prompts stripped, continuations joined, comments dropped."""
    cmds: list[tuple[int, str]] = []
    current: list[str] = []
    first = 0
    for off, raw in enumerate(body):
        line = raw.rstrip()
        if not current:
            if console:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            first = off
        current.append(line[:-1].rstrip() if line.endswith("\\") else line.strip())
        if not line.endswith("\\"):
            cmds.append((first, " ".join(part.strip() for part in current)))
            current = []
    if current:
        cmds.append((first, " ".join(current)))
    return cmds


def commands(doc: Path) -> list[Command]:
    """The commands of every ``bash``/``console``/``sh``/``shell`` block in ``doc``."""
    out: list[Command] = []
    for b in blocks(doc):
        if b.lang not in ("bash", "console", "sh", "shell"):
            continue
        for off, text in _join(b.body, console=b.lang == "console"):
            expect = 0
            if m := EXITS.search(text):
                expect = int(m.group("code"))
                text = text[: m.start()].rstrip()
            out.append(Command(doc, b.line + 1 + off, text, expect, b.skip, b.line))
    return out


EMBEDDED = re.compile(r"(?:^|(?<=[\s/=\"']))fabriccheck\s+[a-z]")


def embedded_commands(doc: Path) -> list[tuple[str, str]]:
    """``fabriccheck ...`` anywhere in a fenced block: systemd units, cron lines, scripts.

    Shell blocks are scanned too (a cron line starts with its schedule, not with the command).
    """
    found: list[tuple[str, str]] = []
    for b in blocks(doc):
        for off, line in _join(b.body, console=False):
            if b.lang == "console":
                line = line[2:] if line.startswith("$ ") else ""
            line = re.sub(r"(^|\s)#.*$", "", line)  # comments are prose
            for m in EMBEDDED.finditer(line):
                found.append((f"{doc.name}:{b.line + 1 + off}", line[m.start():]))
    return found


def fabriccheck_words(command: str) -> tuple[list[str], list[str]]:
    """The subcommand path (``['topology', 'show']``) and the ``--flags`` of a fabriccheck command.

    Only the first command of a pipeline / ``&&`` chain / redirect is looked at.
    """
    try:
        words = shlex.split(strip_env(command), comments=True)
    except ValueError:
        words = command.split()
    if words[:1] == ["sudo"]:
        words = words[1:]
    if not words or words[0] != "fabriccheck":
        return [], []
    head: list[str] = []
    flags: list[str] = []
    in_head = True
    for w in words[1:]:
        if w in ("|", "&&", "||", ";", ">", "2>", ">>") or w.startswith((">", "2>")):
            break
        if w.startswith("-") and w != "-":  # a lone "-" is an argument: standard input
            flags.append(w.split("=", 1)[0])
            in_head = False
        elif in_head and re.fullmatch(r"[a-z][a-z-]*", w) and len(head) < 2:
            head.append(w)
        else:
            in_head = False  # an argument: no subcommand after it
    return head, flags


def prose_lines(doc: Path) -> list[tuple[int, str]]:
    """``(line number, line)`` of ``doc``'s prose: every line outside fenced code blocks."""
    found: list[tuple[int, str]] = []
    inside = None
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        m = FENCE.match(line)
        if m and inside is None:
            inside = m.group("fence")
            continue
        if inside is not None:
            if line.strip().startswith(inside):
                inside = None
            continue
        found.append((n, line))
    return found


def inline_commands(doc: Path) -> list[tuple[int, str]]:
    """``fabriccheck ...`` written in inline code spans in prose (outside fenced blocks)."""
    return [(n, c) for n, line in prose_lines(doc) for c in INLINE.findall(line)]


def links(doc: Path) -> list[tuple[int, str]]:
    """Relative link and image targets of ``doc`` (anchors stripped), outside code."""
    found: list[tuple[int, str]] = []
    for n, line in prose_lines(doc):
        line = re.sub(r"`[^`]*`", "", line)
        for lm in LINK.finditer(line):
            target = lm.group("target") or lm.group("img")
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # http:, mailto:, in-page anchors
            found.append((n, target.split("#", 1)[0]))
    return found
