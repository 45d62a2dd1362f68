"""Robust statistics for history: median, MAD and the Theil–Sen slope (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

#: MAD -> standard deviation of a normal distribution
MAD_TO_SIGMA = 1.4826


def mad(values: Sequence[float], center: float | None = None) -> float:
    """Median absolute deviation around ``center`` (default: the median).

    >>> mad([1.0, 2.0, 3.0, 4.0, 100.0])
    1.0
    """
    if not values:
        raise ValueError("mad() of no values")
    c = median(values) if center is None else center
    return float(median(abs(v - c) for v in values))


def theil_sen_slope(ys: Sequence[float], xs: Sequence[float] | None = None) -> float:
    """Median of pairwise slopes: a trend that a few outliers cannot move.

    >>> theil_sen_slope([10.0, 9.0, 8.0, 50.0, 6.0])
    -1.0
    """
    xs = list(range(len(ys))) if xs is None else list(xs)
    slopes = [
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(len(ys))
        for j in range(i + 1, len(ys))
        if xs[j] != xs[i]
    ]
    return float(median(slopes)) if slopes else 0.0
