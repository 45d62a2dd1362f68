"""The transport reader's message cache (issue 30) changes nothing it answers.

:func:`fabriccheck.probes.nccl_transport.message_action` is cached across outputs, so a wrong
cache would show as one output's transport depending on what was read before it: a stale
answer (a key that forgets part of the text) or a shared mutable one (a reader writing into
what the cache holds). Held here, on the simulator's outputs (every collective, size, fault and
fallback) and on every fixture with ``NCCL INFO`` lines (the repo's, and ``../shared``'s when
present): each output's transport read through a cache warmed by the outputs read before it (in
reverse order) equals the one an uncached reader gives (``message_action.__wrapped__``); every
answer is hashable, so immutable all through; and a reader whose state is scribbled over leaves
the next reader's answer as it was.
"""

from __future__ import annotations

import pytest

from fabriccheck.probes import nccl_transport
from fabriccheck.probes._text import NCCL_LINE_RE
from fabriccheck.probes.nccl_tests import parse_nccl_tests
from fabriccheck.probes.nccl_transport import TransportReader, message_action, read_transport
from tests.conftest import LOCAL_FIXTURES, SHARED_FIXTURES
from tests.probes.sim_outputs import sim_outputs

TEXT_SUFFIXES = {".txt", ".log", ".out", ".json", ".md"}


def _fixture_texts() -> list[str]:
    """Every fixture text with an ``NCCL INFO`` line (repo, and ``../shared`` when present)."""
    roots = [LOCAL_FIXTURES] + [r for r in (SHARED_FIXTURES, SHARED_FIXTURES.parent / "corpus")
                                if r.is_dir()]
    texts = [p.read_text(encoding="utf-8", errors="replace") for root in roots
             for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in TEXT_SUFFIXES]
    return [t for t in texts if "NCCL INFO" in t]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """The simulator's nccl-tests outputs and the fixtures, each with NCCL INFO lines."""
    sim = [t for tool, t in sim_outputs() if tool == "nccl-tests" and "NCCL INFO" in t]
    fixtures = _fixture_texts()
    assert len(sim) > 2000 and len(fixtures) >= 10
    return sim + fixtures


def _transports(text: str) -> tuple:
    """What the reader answers for ``text``: whole-text and through the nccl-tests parser
    (its fast path, or its state machine on outputs the scan does not take)."""
    return read_transport(text), parse_nccl_tests(text).transport


def test_warm_cache_answers_what_an_uncached_reader_does(texts, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(nccl_transport, "message_action", message_action.__wrapped__)
        cold = [_transports(t) for t in texts]
    assert sum(bool(a) for a, _ in cold) > 2000  # most outputs do name their transport
    message_action.cache_clear()
    warm = [_transports(t) for t in reversed(texts)][::-1]
    info = message_action.cache_info()
    assert info.hits > 10 * info.misses, info  # the cache did serve: the check is not vacuous
    assert [i for i, (a, b) in enumerate(zip(warm, cold, strict=True)) if a != b] == []


def _messages(texts: list[str]) -> set[str]:
    return {m["msg"] for t in texts for line in t.splitlines()
            if "NCCL INFO" in line and (m := NCCL_LINE_RE.search(line))}


def test_every_answer_is_immutable_all_through(texts):
    msgs = _messages(texts)
    answers = [message_action(msg) for msg in msgs]
    assert sum(a is not None for a in answers) > 50
    for answer in answers:
        hash(answer)  # TypeError on any list, dict or set inside


def test_a_scribbled_reader_leaves_the_next_one_unchanged(texts):
    text = next(t for t in texts if any(r.net == "ib" and r.gdr for r in read_transport(t)))
    lines = [line for line in text.splitlines() if "NCCL INFO" in line]

    def read() -> TransportReader:
        reader = TransportReader()
        for line in lines:
            m = NCCL_LINE_RE.search(line)
            reader.feed(m["host"], m["pid"], m["dev"], m["msg"])
        return reader

    want = read().ranks(multi_host=True)
    spoilt = read()
    for proc in spoilt.procs.values():
        proc.ib_devs.clear()
        proc.socket_devs[99] = "bogus"
        proc.hca_gdr["bogus"] = True
    for rank in spoilt.by_key.values():
        rank.net.clear()
        rank.distance_gdr.append(True)
    assert spoilt.ranks(multi_host=True) != want
    assert read().ranks(multi_host=True) == want


def test_the_cache_is_bounded():
    assert message_action.cache_info().maxsize == nccl_transport.MESSAGE_CACHE_SIZE <= 1 << 14
