"""Field-by-field reading of config files lives in :mod:`fabriccheck.schema.fields` (below the
topology, beside the schemas that use it); re-exported here for the topology's loaders."""

from __future__ import annotations

from fabriccheck.schema.fields import Fields, join, parse_yaml, read_yaml, type_name

__all__ = ["Fields", "join", "parse_yaml", "read_yaml", "type_name"]
