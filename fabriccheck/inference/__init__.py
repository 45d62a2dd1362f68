"""Inference: evaluate against specs and peers, attribute, localize links (pure)."""

from __future__ import annotations

from fabriccheck.inference.attribute import infer
from fabriccheck.inference.evaluate import evaluate
from fabriccheck.inference.localize import LinkGroup, localize_links
from fabriccheck.inference.peers import judge_against_peers
from fabriccheck.inference.state import Inference

__all__ = ["Inference", "LinkGroup", "evaluate", "judge_against_peers", "infer", "localize_links"]
