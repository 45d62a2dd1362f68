"""Lab fixtures for tests/lab (defined in labfixtures.py so other test dirs can share them)."""

from tests.lab.labfixtures import lab, lab4  # noqa: F401
