"""Field tables of the input models, rendered into the docs (generated, never hand-copied).

Each doc marks a generated block with ``<!-- fields: NAME -->`` … ``<!-- /fields -->``;
``python -m fabriccheck.schema.docs`` rewrites every block, ``--check`` fails when one is stale
(``tests/schema/test_schema_docs.py`` runs the check).
"""

from __future__ import annotations

import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from fabriccheck.schema import faults, inventory, signals, spec, topology

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: block name -> the models it lists, in order (a doc may hold any block, any number of times)
BLOCKS: dict[str, tuple[type[BaseModel], ...]] = {
    "topology": (topology.TopologyFile, topology.NodeModel, topology.NicModel,
                 topology.SwitchModel, topology.LinkModel, topology.NvlDomainModel),
    "generators": (topology.RailOptimized, topology.FatTree, topology.Nvl72),
    "spec": (spec.SpecFile, spec.Probes, spec.ProbeBlock, spec.GroupBar, spec.ConfigBlock),
    "signals": (signals.SignalsFile, signals.SignalModel, signals.PassRule),
    "inventory": (inventory.InventoryFile, inventory.SshSettings, inventory.ProbeSettings,
                  inventory.HostModel, inventory.NicAddressModel, inventory.LabInfo),
    "faults": (faults.FaultsFile, faults.NoiseModel, *faults.FAULT_MODELS),
}  # fmt: skip
_BLOCK = re.compile(r"(<!-- fields: (\w+) -->\n)(.*?)(<!-- /fields -->)", re.S)
_SCALARS = {str: "text", int: "integer", float: "number", bool: "true/false"}


def type_text(annotation: Any) -> str:
    """A reader's name for a field type: ``integer >= 1``, ``list of Node``, ``a | b``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        base = type_text(args[0])
        bounds = [_bound(m) for m in args[1:]]
        return " ".join([base, ", ".join(b for b in bounds if b)]).strip()
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_text(a) for a in args if a is not type(None))
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is dict:
        return f"mapping {type_text(args[0])} → {type_text(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{_title(annotation)}](#{_anchor(annotation)})"
    return _SCALARS.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bound(meta: Any) -> str:
    parts = [f"{op} {getattr(meta, attr):g}"
             for attr, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
             if getattr(meta, attr, None) is not None]  # fmt: skip
    parts += [_bound(sub) for sub in getattr(meta, "metadata", ()) or ()]
    if getattr(meta, "min_length", None):
        parts.append("(not empty)")
    return ", ".join(p for p in parts if p)


def _title(model: type[BaseModel]) -> str:
    return model.__name__


def _anchor(model: type[BaseModel]) -> str:
    return model.__name__.lower()


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
        return "defaults" if isinstance(value, BaseModel) else f"`{value!r}`" if value else "none"
    if field.default is None:
        return "none"
    return f"`{field.default}`" if field.default != "" else '`""`'


def render_model(model: type[BaseModel]) -> str:
    """One model as a heading, its docstring and a table field | type | default | meaning."""
    doc = (model.__doc__ or "").strip().splitlines()[0]
    rows = [f"#### {_title(model)}", "", doc, "", "| field | type | default | meaning |",
            "|---|---|---|---|"]  # fmt: skip
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if field.metadata:
            annotation = typing.Annotated[(annotation, *field.metadata)]  # type: ignore[misc]
        text = type_text(annotation).replace("|", "\\|").replace("\\\\|", "\\|")
        meaning = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{field.alias or name}` | {text} | {_default(field)} | {meaning} |")
    return "\n".join(rows) + "\n"


def render_block(name: str) -> str:
    """The generated text of one doc block."""
    return "\n".join(render_model(m) for m in BLOCKS[name])


def update(text: str) -> str:
    """``text`` with every ``<!-- fields: NAME -->`` block regenerated."""
    return _BLOCK.sub(lambda m: m.group(1) + "\n" + render_block(m.group(2)) + "\n" + m.group(4),
                      text)  # fmt: skip


def main(argv: list[str]) -> int:
    """Rewrite the docs' field blocks; with ``--check`` only report stale ones (exit 1)."""
    stale = []
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        new = update(text)
        if new != text:
            stale.append(path.name)
            if "--check" not in argv:
                path.write_text(new, encoding="utf-8")
    if stale:
        sys.stderr.write(("stale" if "--check" in argv else "updated") + ": " + " ".join(stale)
                         + "\n")  # fmt: skip
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
