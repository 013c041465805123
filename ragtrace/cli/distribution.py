"""Distributions of one figure (exact percentiles over value counts) and proxies over time."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .._internal.names import PROXY_METRICS

MAX_DISTINCT = 50_000  # distinct values per distribution before values are rounded
MAX_BUCKETS = 240
_FIRST_BUCKET_NS = 60 * 10**9


class Distribution:
    """Exact nearest-rank percentiles over a value -> count map.

    Should a figure ever take more than ``MAX_DISTINCT`` distinct values, values are rounded to
    fewer significant digits (3, then 2, then 1) until they fit: memory stays bounded, and the
    percentiles become approximate only then.
    """

    __slots__ = ("counts", "n", "_digits")

    def __init__(self) -> None:
        self.counts: dict[float, int] = {}
        self.n = 0
        self._digits = 0  # 0: exact values

    def add(self, value: float, count: int = 1) -> None:
        if self._digits:
            value = _significant(value, self._digits)
        counts = self.counts
        known = counts.get(value)
        self.n += count
        if known is not None:
            counts[value] = known + count
            return
        counts[value] = count
        while len(self.counts) > MAX_DISTINCT and self._digits != 1:
            self._digits = 3 if not self._digits else self._digits - 1
            rounded: dict[float, int] = {}
            for key, number in self.counts.items():
                key = _significant(key, self._digits)
                rounded[key] = rounded.get(key, 0) + number
            self.counts = rounded

    def percentile(self, p: float) -> float | None:
        if not self.n:
            return None
        rank = max(1, math.ceil(p / 100 * self.n))
        seen = 0
        for value in sorted(self.counts):
            seen += self.counts[value]
            if seen >= rank:
                return value
        return None  # pragma: no cover - rank <= n

    def histogram(self, bins: int, low: float = 0.0, high: float = 1.0) -> list[int]:
        counts = [0] * bins
        width = (high - low) / bins
        for value, count in self.counts.items():
            index = min(bins - 1, max(0, int((value - low) / width))) if width else 0
            counts[index] += count
        return counts


def _significant(value: float, digits: int) -> float:
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


class Series:
    """Mean of each proxy per time bucket; buckets double in width to stay under MAX_BUCKETS."""

    def __init__(self) -> None:
        self.width = _FIRST_BUCKET_NS
        self.buckets: dict[int, list[float]] = {}  # bucket -> [n, sum and count per proxy...]

    def add(self, time_ns: int, figures: Mapping[str, Any]) -> None:
        if time_ns <= 0:
            return
        slot = self.buckets.get(time_ns // self.width)
        if slot is None:
            slot = self.buckets[time_ns // self.width] = [0.0] * (1 + 2 * len(PROXY_METRICS))
            if len(self.buckets) > MAX_BUCKETS:
                self._widen()
                slot = self.buckets[time_ns // self.width]
        slot[0] += 1
        for index, metric in enumerate(PROXY_METRICS):
            value = figures.get(metric)
            if isinstance(value, (int, float)):
                slot[1 + 2 * index] += value
                slot[2 + 2 * index] += 1

    def _widen(self) -> None:
        while len(self.buckets) > MAX_BUCKETS:
            self.width *= 2
            merged: dict[int, list[float]] = {}
            for key, slot in self.buckets.items():
                target = merged.setdefault(key // 2, [0.0] * len(slot))
                for index, value in enumerate(slot):
                    target[index] += value
            self.buckets = merged

    def points(self) -> list[dict[str, Any]]:
        out = []
        for key in sorted(self.buckets):
            slot = self.buckets[key]
            point: dict[str, Any] = {"start_ns": key * self.width, "traces": int(slot[0])}
            for index, metric in enumerate(PROXY_METRICS):
                count = slot[2 + 2 * index]
                point[metric] = slot[1 + 2 * index] / count if count else None
            out.append(point)
        return out
