"""Inference: evaluate against specs and peers, attribute, localize links (pure)."""
