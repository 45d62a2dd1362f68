"""Inference: evaluate against specs and peers, attribute, localize links (pure)."""

from __future__ import annotations

from fabriccheck.inference.attribute import Inference, infer
from fabriccheck.inference.evaluate import evaluate, evaluate_peers
from fabriccheck.inference.localize import LinkGroup, localize_links

__all__ = ["Inference", "LinkGroup", "evaluate", "evaluate_peers", "infer", "localize_links"]
