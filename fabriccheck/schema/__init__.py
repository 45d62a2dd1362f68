"""Input schemas: strict models of every file a user writes, checked at the door.

One module per format (:mod:`.topology`, :mod:`.faults`, :mod:`.spec`, :mod:`.inventory`), a
strict YAML reader (:mod:`.yamlio`: duplicate keys refused) and :func:`~.base.check` which turns
a pydantic validation error into one :class:`~fabriccheck.errors.ConfigError` line
``FILE:field.path: problem`` with a hint ("did you mean 'user'?").

Imported lazily by the loaders (pydantic costs start-up time).
"""

from __future__ import annotations
