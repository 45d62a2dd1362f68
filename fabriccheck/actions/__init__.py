"""Actions: drain / taint / exclude list / metrics (dry-run unless --apply)."""
