"""Feeding rows into the overall group, the per-dimension groups, the series and the worst list.

Rows repeat: what a row adds to a group is a small tuple (``aggregate.contribution``) plus its
summary numbers, and the ``Aggregator`` counts equal tuples and equal numbers per group (up to
``PENDING_LIMIT`` distinct ones) before applying each once with its count, the numbers value by
value, instead of updating every distribution of every group for every row. ``overall`` and
``groups`` apply what is pending before they are read, so the totals, counters and distributions
(their insertion order included) are those of adding the rows one by one.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Mapping

from .._internal.names import METRIC_RECALL_PROXY
from .aggregate import Contribution, Group, contribution, summary_numbers
from .distribution import Series
from .recommend import recommend
from .row import Row
from .settings import below
from .verdicts import SEVERITY, Verdict, verdict

DEFAULT_GROUP_BY = ("pipeline", "route", "version", "top_k")
MAX_GROUP_VALUES = 50  # distinct values per grouping dimension (and score names, labels); the rest go to OTHER
OTHER = "(other)"
PENDING_LIMIT = 4096  # distinct row contributions counted before they are applied to the groups


def top_k_bucket(top_k: int) -> str:
    if top_k <= 10:
        return str(top_k)
    for low, high in ((11, 20), (21, 50), (51, 100)):
        if top_k <= high:
            return f"{low}-{high}"
    return ">100"


class Aggregator:
    """Feeds rows into the overall group, the per-dimension groups, the series and the worst list."""

    def __init__(self, thresholds: Mapping[str, float], *, group_by: Iterable[str] = DEFAULT_GROUP_BY, rows: int = 20, min_traces: int = 5) -> None:
        self.thresholds = dict(thresholds)
        self.group_by = tuple(group_by)
        self.rows_limit = max(0, rows)
        self.min_traces = min_traces
        self._overall = Group()
        self._groups: dict[str, dict[str, Group]] = {dimension: {} for dimension in self.group_by}
        self.series = Series()
        self.mismatched = 0
        self.first_time = 0
        self.last_time = 0
        self._worst: list[tuple[tuple[float, ...], int, Row, Verdict]] = []
        self._counter = itertools.count()
        self._index: dict[Contribution, int] = {}  # distinct contributions pending, and their order
        self._items: list[Contribution] = []
        self._numbers_index: dict[tuple[tuple[str, float], ...], int] = {}  # distinct summary numbers pending
        self._numbers: list[tuple[tuple[str, float], ...]] = []

    @property
    def overall(self) -> Group:
        """The group of all rows (pending contributions applied)."""
        self.flush()
        return self._overall

    @property
    def groups(self) -> dict[str, dict[str, Group]]:
        """Dimension -> value -> group (pending contributions applied)."""
        self.flush()
        return self._groups

    def flush(self) -> None:
        """Apply the counted contributions of every group."""
        items, numbers = self._items, self._numbers
        self._overall.flush(items, numbers)
        for groups in self._groups.values():
            for group in groups.values():
                group.flush(items, numbers)
        self._index.clear()
        items.clear()
        self._numbers_index.clear()
        numbers.clear()

    def add(self, row: Row) -> Verdict:
        row_verdict = verdict(row, self.thresholds)
        # the figures are counted value by value (one of them may differ in every row, e.g. wasted
        # tokens, while the others repeat); the rest of the row as one tuple
        numbers = summary_numbers(row.figures)
        item = contribution(row, row_verdict, ())
        index = self._index.get(item)
        number = self._numbers_index.get(numbers)
        if index is None or number is None:
            if len(self._items) >= PENDING_LIMIT or len(self._numbers) >= PENDING_LIMIT:
                self.flush()
            index = self._index.get(item)
            if index is None:
                index = self._index[item] = len(self._items)
                self._items.append(item)
            number = self._numbers_index.get(numbers)
            if number is None:
                number = self._numbers_index[numbers] = len(self._numbers)
                self._numbers.append(numbers)
        group = self._overall
        counts = group.pending
        counts[index] = counts.get(index, 0) + 1
        counts = group.pending_numbers
        counts[number] = counts.get(number, 0) + 1
        for dimension in self.group_by:
            value = self._dimension_value(row, dimension)
            if value is None:
                continue
            groups = self._groups[dimension]
            group = groups.get(value)
            if group is None:
                if len(groups) >= MAX_GROUP_VALUES:
                    value = OTHER
                    group = groups.get(value)
                if group is None:
                    group = groups[value] = Group()
            counts = group.pending
            counts[index] = counts.get(index, 0) + 1
            counts = group.pending_numbers
            counts[number] = counts.get(number, 0) + 1
        self.series.add(row.time, row.figures)
        if row.mismatches:
            self.mismatched += 1
        if row.time:
            self.first_time = min(self.first_time or row.time, row.time)
            self.last_time = max(self.last_time, row.time)
        if self.rows_limit:
            recall = row.figures.get(METRIC_RECALL_PROXY)
            priority = (SEVERITY[row_verdict.label], recall if isinstance(recall, (int, float)) else 2.0, row.time)
            entry = ((-priority[0], -priority[1], -priority[2]), next(self._counter), row, row_verdict)
            if len(self._worst) < self.rows_limit:
                heapq.heappush(self._worst, entry)
            elif entry[0] > self._worst[0][0]:
                heapq.heapreplace(self._worst, entry)
        return row_verdict

    @staticmethod
    def _dimension_value(row: Row, dimension: str) -> str | None:
        if dimension == "pipeline":
            return row.pipeline
        if dimension == "top_k":
            return top_k_bucket(row.top_k) if row.top_k is not None else None
        value = row.labels.get(dimension)
        return None if value is None else str(value)

    def worst(self) -> list[tuple[Row, Verdict]]:
        """The kept rows, worst first (check, then not measurable, then ok; low recall first)."""
        ordered = sorted(self._worst, key=lambda entry: (tuple(-p for p in entry[0]), entry[1]))
        return [(row, row_verdict) for _, _, row, row_verdict in ordered]

    # -- recommendations ---------------------------------------------------------------------------
    def recommendations(self) -> list[str]:
        pipelines = self.groups.get("pipeline", {})
        if len(pipelines) > 1:
            out = []
            for name in sorted(pipelines):
                out.extend(f"[{name}] {text}" for text in recommend(pipelines[name], self.min_traces))
            return out
        return recommend(self.overall, self.min_traces)

    def gate(self, fail_under: Mapping[str, float]) -> list[str]:
        """The --fail-under bars the overall p50s miss (a missing p50 misses too)."""
        failures = []
        for metric, bar in fail_under.items():
            p50 = self.overall.figures[metric].percentile(50)
            if p50 is None:
                failures.append(f"{metric}: no measurable traces (bar {bar:g})")
            elif below(p50, bar):
                failures.append(f"{metric}: p50 {p50:.3f} < {bar:g}")
        return failures
