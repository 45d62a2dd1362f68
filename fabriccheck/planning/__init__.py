"""Planning: carve groups, pair rounds, bisection steps (pure)."""
