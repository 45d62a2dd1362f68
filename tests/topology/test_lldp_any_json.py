"""Property test: any JSON (shaped like lldpctl's or not) gives an LLDP table or a one-line
refusal naming the file, never a crash."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.errors import FabricCheckError
from fabriccheck.topology.discovery.lldp import import_lldp

KEYS = st.sampled_from(["lldp", "interface", "chassis", "port", "id", "name", "value", "type",
                        "local-chassis", "eth0", "leaf-1", "descr", "mac", "ifname"])
LEAF = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(
    ["eth0", "leaf-1", "mac", "ifname", "00:11:22:33:44:55", "swp1", ""]))
JSONISH = st.recursive(LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=4)), max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, JSONISH, min_size=1, max_size=3))
def test_any_json_imports_or_is_refused_in_one_line(doc):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "host1.json"
        path.write_text(json.dumps(doc))
        try:
            import_lldp([path], spines=1)
        except FabricCheckError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
