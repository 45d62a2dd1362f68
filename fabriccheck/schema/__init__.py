"""Input schemas: strict models of every file a user writes, checked at the door.

One module per format (:mod:`.topology`, :mod:`.faults`, :mod:`.spec`, :mod:`.signals`,
:mod:`.inventory`), a strict YAML reader (:mod:`.yamlio`: duplicate keys refused, both lines
named), :func:`~.base.check` which turns a pydantic validation error into one
:class:`~fabriccheck.errors.ConfigError` line ``FILE:field.path: problem`` with a hint ("did you
mean 'user'?"), and :mod:`.docs` which renders the models' field tables into ``docs/``.

The models check shape, types and ranges; the loaders (``topology/load.py``, ``specs.py``,
``faults.py``, ``inventory/file.py``) keep the cross-references (a link's NIC exists, a fault's
node is in the topology) and return the same objects as before. Imported lazily by the loaders
(pydantic costs start-up time).
"""

from __future__ import annotations
