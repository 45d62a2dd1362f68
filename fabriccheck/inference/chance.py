"""Convictions noise could explain: a node or NIC found bad on too few failures for its run.

The device rules (:mod:`~fabriccheck.inference.device_judges`) convict on patterns: a NIC
that never passed, failed with two partners and failed a confirmation against proven-good
ones. Each of those failures is a fresh test, but on a busy fabric any test fails now and
then with nothing wrong: at the run's noise rate ``q``. A healthy NIC fails its ``n`` tests in
a row with probability ``q ** n``, and a sweep judges thousands of NICs, so on a fabric where
6.5 % of tests fail (8 % jitter, 3 % glitches) one of 4,096 healthy NICs fails its 5 tests
in about one run of 200 (issue 31 measured it: a drain in 1 of 20 busy 512-node sweeps).

So a device found bad on ``n`` failures stays bad only while ``N * q ** n`` is below
:data:`ALPHA` (``N`` the devices of its kind the run tested): the chance that noise alone
convicts some healthy one. Otherwise it is a suspect, its counts in the reason, and the
planner confirms it again (a NIC failing every test reaches the bar in another round).

``q`` is measured on the run's own finished tests with no bad or suspect device on them and
no bad link (whatever failed there, nothing found explains), smoothed toward
:data:`PRIOR_RATE` as if :data:`PRIOR_TESTS` more tests had been run (a 2-node job has too
few tests to measure its noise). Numbers: at ``q`` = 2 % (3 % jitter, 1 % glitches) 4 failures
convict among 4,096 NICs and 5 among 131,072 (16,384 nodes); at 6.5 % a NIC needs 6 among
4,096; a 2-node job (16 NICs, ``q`` near 1 %) convicts on 3.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fabriccheck.models import FAIL, PASS, SUSPECT, Observation, Verdict, nic_node

#: the chance, per run, that noise alone convicts some healthy device
ALPHA = 0.001
#: the noise rate assumed before a run has measured its own, and the tests that belief is
#: worth: a run's measured rate takes over as its tests outnumber these
PRIOR_RATE, PRIOR_TESTS = 0.01, 100


def noise_rate(observations: Iterable[Observation], blamed_nodes: set[str],
               blamed_nics: set[str], skip: set[str] | frozenset[str] = frozenset()) -> float:
    """The share of finished tests that failed with no blamed node or NIC on them (``skip``:
    test ids left out, e.g. those crossing a bad link or that ECMP contention may explain;
    intermittence recheck samples are always left out: a few NICs' many short tests),
    smoothed toward :data:`PRIOR_RATE`."""
    n = k = 0
    for o in observations:
        t = o.test
        if (o.status not in (PASS, FAIL) or t.params.recheck_of or t.test_id in skip
                or any(x in blamed_nodes for x in t.nodes)
                or any(x in blamed_nics for x in t.nics)):
            continue
        n += 1
        k += o.status == FAIL
    return (k + PRIOR_RATE * PRIOR_TESTS) / (n + PRIOR_TESTS)


def chance(n_fails: int, rate: float, devices: int) -> float:
    """The chance that some one of ``devices`` healthy devices fails ``n_fails`` tests in a
    row at the noise rate ``rate`` (a union bound: ``devices * rate ** n_fails``, at most 1)."""
    return min(1.0, devices * rate ** n_fails)


def fails_needed(rate: float, devices: int) -> int:
    """The fewest failures that convict among ``devices`` at the noise rate ``rate``."""
    n = 1
    while chance(n, rate, devices) >= ALPHA:
        n += 1
    return n


def demote_unlikely(bad: dict[str, Verdict], suspects: dict[str, Verdict], rate: float,
                    devices: int, what: str) -> None:
    """Move every verdict in ``bad`` whose failures noise could explain among ``devices`` (of
    kind ``what``, e.g. "NICs") to ``suspects``, saying why."""
    need = fails_needed(rate, devices)
    for name in sorted(bad):
        v = bad[name]
        n = len(v.evidence)
        if n >= need:
            continue
        del bad[name]
        suspects[name] = Verdict(
            v.kind, name, SUSPECT,
            f"{v.reason}; noise could explain it: at this run's rate of failures with nothing "
            f"found to blame ({rate:.1%}), {n} failures in a row happen to one of {devices} "
            f"healthy {what} in {chance(n, rate, devices):.1%} of runs; a drain needs {need} "
            f"(under {ALPHA:.1%}): needs confirmation", v.evidence)


def tested_nodes(observations: Sequence[Observation]) -> int:
    """The nodes ``observations`` tested (those of their NICs included)."""
    return len({n for o in observations for n in o.test.nodes}
               | {nic_node(x) for o in observations for x in o.test.nics})
