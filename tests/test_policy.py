"""Run policies: presets and validation (a bad value is a ConfigError naming the field)."""

from __future__ import annotations

import pytest

from fabriccheck.errors import ConfigError
from fabriccheck.policy import BisectPolicy, GatePolicy, SweepPolicy


def test_presets():
    assert SweepPolicy().sweep_rounds == 2 and SweepPolicy().per_rail
    g = GatePolicy(budget_s=60)
    assert g.mode == "gate" and g.sweep_rounds == 1 and g.max_rounds == 4 and g.budget_s == 60
    assert g.second_round_only_on_failure
    b = BisectPolicy()
    assert b.mode == "bisect" and b.scale_group_size == 8
    assert not SweepPolicy(pair_probe="nccl").per_rail


@pytest.mark.parametrize("kw,field", [
    ({"pair_probe": "ping"}, "pair_probe"),
    ({"scale_probe": "ib_write_bw"}, "scale_probe"),
    ({"sweep_rounds": 0}, "rounds"),
    ({"scale_group_size": 3}, "scale_group_size"),
    ({"budget_s": 0}, "--budget-s"),
])
def test_bad_values_name_the_field(kw, field):
    with pytest.raises(ConfigError) as exc:
        SweepPolicy(**kw)
    assert exc.value.field == field
