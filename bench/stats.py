"""Small statistics helpers for the benchmarks (no numpy)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0–100) of ``values``, linear interpolation; NaN when empty."""
    if not values:
        return math.nan
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * p / 100
    lo = math.floor(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (NaN when empty)."""
    return percentile(values, 50)


def rnd(x: float, digits: int = 3) -> float:
    """``x`` rounded for the JSON report."""
    return round(x, digits)
