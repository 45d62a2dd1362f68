"""Two baselines fabriccheck is measured against, implemented honestly on the same simulator.

- **Round-robin pairing** (SuperBench style): every node meets every other node once, over
  ``n - 1`` rounds (circle method), every rail tested per pair (``ib_write_bw``). No topology
  awareness. A NIC is bad when more than half of its tests fail, a node when more than half of
  its NICs are bad or all its tests hang. At large ``n`` only the first ``max_rounds`` rounds are
  run; rounds, tests and test time are then extrapolated to ``n - 1`` rounds (marked ``est``).
- **Recursive halving** (AMD Primus / sichek style): test the whole node list as one collective
  (``nccl`` over all rails); a failing list is split in halves tested in parallel, down to pairs;
  each member of a failing pair is then tested with a node from a passing half. A node is bad
  when that last test fails.

Both use the real parsers and the same spec floors as fabriccheck (``inference.evaluate``).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from fabriccheck.inference.evaluate import evaluate
from fabriccheck.models import FAIL, HANG, PASS, Flow, Test
from fabriccheck.planning.build import ring_flows
from fabriccheck.planning.pairing import circle_matching
from fabriccheck.probes.detect import parse_raw
from fabriccheck.topology.view import FabricView


@dataclass
class BaselineResult:
    name: str
    rounds: int = 0
    tests: int = 0
    test_seconds: float = 0.0
    drain: set[str] = field(default_factory=set)
    cpu_s: float = 0.0
    estimated: bool = False


class _Runner:
    """Runs rounds on an executor, judges them, tracks rounds/tests/test time and CPU."""

    def __init__(self, executor, spec, res: BaselineResult) -> None:
        self.executor, self.spec, self.res = executor, spec, res
        self.exec_cpu = 0.0

    def round(self, tests: list[Test]):
        if not tests:
            return []
        t0 = time.process_time()
        raws = self.executor.run_round(tests)
        self.exec_cpu += time.process_time() - t0
        self.res.rounds += 1
        self.res.tests += len(tests)
        self.res.test_seconds += max(r.duration_s for r in raws)
        return [evaluate(t, r, parse_raw(t, r), self.spec) for t, r in zip(tests, raws,
                                                                          strict=True)]


def round_robin(nodes, topology, spec, executor, *, max_rounds: int | None = None,
                duration_s: float = 5.0) -> BaselineResult:
    """Exhaustive pairing: ``n - 1`` rounds, all rails per pair (see the module docstring)."""
    view = FabricView(topology)
    res = BaselineResult("round-robin (n-1 rounds)")
    run = _Runner(executor, spec, res)
    cpu0 = time.process_time()
    nodes = sorted(nodes)
    total = len(nodes) - 1 if len(nodes) % 2 == 0 else len(nodes)
    todo = total if max_rounds is None else min(total, max_rounds)
    ps = spec.lookup("ib_write_bw", 2)
    fails: dict[str, int] = defaultdict(int)
    seen: dict[str, int] = defaultdict(int)
    hangs: dict[str, int] = defaultdict(int)
    for k in range(todo):
        tests = []
        for a, b in circle_matching(nodes, k):
            for r in view.common_rails(a, b):
                src, dst = view.rails_of[a][r], view.rails_of[b][r]
                tests.append(Test(f"rr{k}-{len(tests)}", "ib_write_bw", (a, b), (Flow(src, dst),),
                                  round=k + 1, timeout_s=3 * duration_s + 17,
                                  params={"size_bytes": ps.size_bytes, "rails": (r,),
                                          "duration_s": duration_s}))
        for o in run.round(tests):
            for nic in o.test.nics:
                seen[nic] += 1
                fails[nic] += o.status == FAIL
                hangs[nic] += o.status == HANG
    by_node: dict[str, list[str]] = defaultdict(list)
    for nic, n in seen.items():
        node = nic.split("/", 1)[0]
        if hangs[nic] == n:
            by_node[node].append("hang")
        elif fails[nic] > n / 2:
            by_node[node].append("bad")
    for node, marks in by_node.items():
        if marks:
            res.drain.add(node)  # a bad NIC or hung node drains the node
    if todo < total:  # extrapolate the cost of the rounds not run
        per_round_s = res.test_seconds / max(1, res.rounds)
        per_round_tests = res.tests / max(1, res.rounds)
        res.rounds, res.tests = total, int(per_round_tests * total)
        res.test_seconds = per_round_s * total
        res.estimated = True
    res.cpu_s = time.process_time() - cpu0 - run.exec_cpu
    return res


def recursive_halving(nodes, topology, spec, executor) -> BaselineResult:
    """Whole list as one collective, failing halves recursively, pairs resolved against a
    node from a passing half (see the module docstring)."""
    view = FabricView(topology)
    res = BaselineResult("recursive halving")
    run = _Runner(executor, spec, res)
    cpu0 = time.process_time()
    timeout = spec.timeout_s
    queue: list[tuple[str, ...]] = [tuple(sorted(nodes))]
    good: list[str] = []
    singles: list[str] = []
    k = 0

    def group_test(group, tag):
        rails = sorted(set.intersection(*(set(view.rails_of[n]) for n in group)))
        ps = spec.lookup("nccl", len(group))
        return Test(tag, "nccl", tuple(group), ring_flows(group, rails, view), round=k,
                    timeout_s=timeout,
                    params={"size_bytes": ps.size_bytes, "min_bytes": ps.size_bytes,
                            "collective": "all_reduce", "rails": tuple(rails),
                            "gpus_per_node": topology.gpus_per_node})

    while queue or singles:
        k += 1
        tests, parts = [], []
        for g in queue:
            tests.append(group_test(g, f"h{k}-{len(tests)}"))
            parts.append(g)
        partners = [n for n in good if n not in set(singles)]
        single_tests = []
        for i, s in enumerate(singles):
            if i < len(partners):
                single_tests.append((s, group_test((s, partners[i]), f"h{k}-s{i}")))
            else:
                res.drain.add(s)  # nobody known good to tell it apart: flagged
        obs = run.round(tests + [t for _, t in single_tests])
        queue, next_singles = [], []
        for g, o in zip(parts, obs[:len(parts)], strict=True):
            if o.status == PASS:
                good.extend(g)
            elif len(g) > 2:
                mid = (len(g) + 1) // 2
                queue += [g[:mid], g[mid:]]
            else:
                next_singles.extend(g)
        for (s, _), o in zip(single_tests, obs[len(parts):], strict=True):
            if o.status != PASS:
                res.drain.add(s)
        singles = next_singles
        if k > 64:
            break
    res.cpu_s = time.process_time() - cpu0 - run.exec_cpu
    return res
