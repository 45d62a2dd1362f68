"""Inventories: where idle nodes come from (static, slurm, ray, kubernetes)."""
