"""The docs' field tables are generated from the input models and must be current."""

from __future__ import annotations

import re

import pytest

from fabriccheck.schema import docs
from fabriccheck.schema.inventory import SshSettings


def test_docs_field_tables_are_current():
    """Fails when a model changed and ``python -m fabriccheck.schema.docs`` was not run."""
    assert docs.main(["--check"]) == 0


def test_every_file_format_is_in_the_docs():
    used = {m for p in docs.DOCS.glob("*.md") for m in re.findall(r"<!-- fields: (\w+) -->",
                                                                    p.read_text())}  # fmt: skip
    assert used <= set(docs.BLOCKS)
    # faults: the simulator's file, documented with the sweep (docs/sweep.md, another page)
    assert {"topology", "generators", "spec", "signals", "inventory"} <= used


def test_a_table_names_types_bounds_and_defaults():
    text = docs.render_model(SshSettings)
    assert "| `port` | integer >= 1, <= 65535 | `22` |" in text
    assert "| `key` | text (not empty) | none |" in text


@pytest.mark.parametrize("name", sorted(docs.BLOCKS))
def test_every_block_renders_every_field(name):
    text = docs.render_block(name)
    for model in docs.BLOCKS[name]:
        for field_name, field in model.model_fields.items():
            assert f"| `{field.alias or field_name}` |" in text, (model.__name__, field_name)
