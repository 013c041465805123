"""Per-trace verdicts, streaming aggregates and data-backed recommendations.

Memory is bounded by the number of *distinct* values, not traces: each figure is kept as a
value -> count map, which gives exact percentiles (nearest rank: the smallest observed value with at
least p% of observations at or below it) because ratios such as 3/10 repeat. Time series use
adaptive buckets (at most ``MAX_BUCKETS``); only the ``rows`` worst traces are kept for display.

Rows repeat too: what a row adds to a group is a small tuple (``contribution``) plus its summary
numbers, and the ``Aggregator`` counts equal tuples and equal numbers per group (up to
``PENDING_LIMIT`` distinct ones) before applying each once with its count, the numbers value by
value, instead of updating every distribution of every group for every row. ``overall`` and
``groups`` apply what is pending before they are read, so the totals, counters and distributions
(their insertion order included) are those of adding the rows one by one.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._internal.figures import (
    STATUS_EMPTY_CONTEXT,
    STATUS_EMPTY_RETRIEVAL,
    STATUS_NO_ANSWER,
    STATUS_NO_CONTEXT,
    STATUS_NO_RETRIEVAL,
    STATUS_UNREADABLE_RETRIEVAL,
)
from .._internal.names import (
    METRIC_CITED,
    METRIC_CITED_POSITIONS,
    METRIC_CONTEXT_PRECISION,
    METRIC_CONTEXT_UTILIZATION,
    METRIC_DUPLICATE_CHUNKS,
    METRIC_IN_CONTEXT,
    METRIC_INVALID_CITATIONS,
    METRIC_RECALL_PROXY,
    METRIC_RECALL_PROXY_WEIGHTED,
    METRIC_RETRIEVED,
    METRIC_WASTED_CONTEXT_TOKENS,
    PROXY_METRICS,
)
from .row import (
    STATUS_ATTRIBUTES_LOST,
    STATUS_INCOMPLETE,
    STATUS_NO_CHUNK_TEXT,
    STATUS_NO_PROMPT,
    STATUS_NO_RAG_SPANS,
    STATUS_PROMPT_TOO_LARGE,
    STATUS_SPANS_MISSING,
    Row,
)

PERCENTILES = (25, 50, 90)
SUMMARY_FIGURES = (
    METRIC_CONTEXT_PRECISION,
    METRIC_RECALL_PROXY,
    METRIC_RECALL_PROXY_WEIGHTED,
    METRIC_CONTEXT_UTILIZATION,
    METRIC_WASTED_CONTEXT_TOKENS,
    METRIC_RETRIEVED,
    METRIC_IN_CONTEXT,
    METRIC_CITED,
)
DEFAULT_GROUP_BY = ("pipeline", "route", "version", "top_k")
MAX_GROUP_VALUES = 50  # distinct values per grouping dimension; the rest go to "(other)"
MAX_DISTINCT = 50_000  # distinct values per distribution before values are rounded
MAX_BUCKETS = 240
PENDING_LIMIT = 4096  # distinct row contributions counted before they are applied to the groups
_FIRST_BUCKET_NS = 60 * 10**9

VERDICT_OK = "ok"
VERDICT_CHECK = "check"
VERDICT_NOT_MEASURABLE = "not measurable"
_SEVERITY = {VERDICT_CHECK: 0, VERDICT_NOT_MEASURABLE: 1, VERDICT_OK: 2}

# shares that make a recommendation worth showing
CITE_NOTHING_SHARE = 0.2
DUPLICATE_SHARE = 0.05
EMPTY_RETRIEVAL_SHARE = 0.05
INVALID_CITATION_SHARE = 0.1
NOT_MEASURABLE_SHARE = 0.2
MIN_MIDDLE_PROMPT = 5  # prompts with fewer chunks have no "middle" worth talking about

REASON_TEXT = {
    STATUS_NO_RETRIEVAL: "no retrieval",
    STATUS_EMPTY_RETRIEVAL: "empty retrieval",
    STATUS_UNREADABLE_RETRIEVAL: "retrieved chunks unreadable",
    STATUS_NO_CONTEXT: "no context recorded",
    STATUS_EMPTY_CONTEXT: "empty context",
    STATUS_NO_ANSWER: "no answer",
    STATUS_INCOMPLETE: "incomplete trace (root span missing)",
    STATUS_ATTRIBUTES_LOST: "ragtrace attributes missing",
    STATUS_SPANS_MISSING: "spans missing (recorded figures differ)",
    STATUS_NO_CHUNK_TEXT: "no chunk text to locate",
    STATUS_NO_PROMPT: "no prompt to search",
    STATUS_PROMPT_TOO_LARGE: "prompt too large to search",
    STATUS_NO_RAG_SPANS: "no retrieval or model spans",
}


SHORT = {
    METRIC_CONTEXT_PRECISION: "precision",
    METRIC_RECALL_PROXY: "recall",
    METRIC_RECALL_PROXY_WEIGHTED: "recall_w",
    METRIC_CONTEXT_UTILIZATION: "utilization",
}


# what one row adds to a group: (verdict label, not-measurable reason or None, inferred, summary
# numbers, answers, nonconformant, cites nothing, has invalid citations, retrievals, empty
# retrievals, duplicates or None, retrieved items, |C|, cited positions or None, (top_k, deepest
# placed rank, |C| or None, |R| or None) or None)
Contribution = tuple[Any, ...]


def reason_text(status: str) -> str:
    return REASON_TEXT.get(status, status.replace("_", " "))


# --- verdicts -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Verdict:
    label: str
    reasons: tuple[str, ...]

    def __str__(self) -> str:
        return self.label + (": " + "; ".join(self.reasons) if self.reasons else "")


def verdict(row: Row, thresholds: Mapping[str, float]) -> Verdict:
    """ok, check (with the bars missed) or not measurable (with why)."""
    if not row.measurable:
        return Verdict(VERDICT_NOT_MEASURABLE, tuple(reason_text(s) for s in row.status[:2]) or ("no figures",))
    reasons = []
    for metric, bar in thresholds.items():
        value = row.figures.get(metric)
        if isinstance(value, (int, float)) and value < bar:
            reasons.append(f"{SHORT.get(metric, metric)}<{bar:g}")
    if row.nonconformant:
        reasons.append("no citations")
    invalid = row.figures.get(METRIC_INVALID_CITATIONS)
    if invalid:
        reasons.append(f"{invalid} invalid citation{'s' if invalid != 1 else ''}")
    return Verdict(VERDICT_CHECK if reasons else VERDICT_OK, tuple(reasons))


# --- distributions --------------------------------------------------------------------------------
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

    def share_below(self, bar: float) -> float:
        return sum(c for v, c in self.counts.items() if v < bar) / self.n if self.n else 0.0

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


@dataclass(slots=True)
class Group:
    """Everything summarised about one set of rows (all, one pipeline, one version...)."""

    traces: int = 0
    measurable: int = 0
    inferred: int = 0
    answers: int = 0
    nonconformant: int = 0
    traces_with_answers: int = 0
    traces_citing_nothing: int = 0
    traces_with_invalid: int = 0
    retrievals: int = 0
    empty_retrievals: int = 0
    retrieved_items: int = 0
    duplicates: int = 0
    figures: dict[str, Distribution] = field(default_factory=lambda: {f: Distribution() for f in SUMMARY_FIGURES})
    reasons: Counter[str] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)
    # for recommendations
    positions: Counter[tuple[int, int]] = field(default_factory=Counter)  # (|C|, cited position)
    sizes: Counter[int] = field(default_factory=Counter)  # |C| of runs whose cited positions are known
    by_top_k: dict[int, dict[str, Distribution]] = field(default_factory=dict)
    # counted by the Aggregator and not applied yet: its index of a contribution (without the
    # numbers) -> count, and its index of a row's summary numbers -> count
    pending: dict[int, int] = field(default_factory=dict, repr=False, compare=False)
    pending_numbers: dict[int, int] = field(default_factory=dict, repr=False, compare=False)

    def add(self, row: Row, row_verdict: Verdict, numbers: Iterable[tuple[str, float]]) -> None:
        """One row; ``numbers`` are its summary figures that are numbers (see ``summary_numbers``).

        The Aggregator counts equal rows and ``flush``es them instead; the tests use this one-by-one
        path as the reference the counted path must match."""
        self.apply(contribution(row, row_verdict, tuple(numbers)))

    def flush(self, items: list[Contribution], numbers: list[tuple[tuple[str, float], ...]]) -> None:
        """Apply what the Aggregator counted: ``pending`` (index in ``items`` -> count) and
        ``pending_numbers`` (index in ``numbers`` -> count), the latter value by value."""
        pending = self.pending
        if pending:
            for index, count in pending.items():
                self.apply(items[index], count)
            pending.clear()
        pending = self.pending_numbers
        if pending:
            # one figure may take a new value in every row (wasted tokens) while the others repeat:
            # add each (figure, value) once, in the order the values first came
            values: dict[tuple[str, float], int] = {}
            for index, count in pending.items():
                for pair in numbers[index]:
                    values[pair] = values.get(pair, 0) + count
            distributions = self.figures
            for (metric, value), count in values.items():
                distributions[metric].add(value, count)
            pending.clear()

    def apply(self, item: Contribution, count: int = 1) -> None:
        """``count`` rows whose contribution is ``item`` (see ``contribution``)."""
        label, reason, inferred, numbers, answers, nonconformant, citing_nothing, invalid, retrievals, empty, duplicates, items, size, positions, depth = item
        self.traces += count
        self.verdicts[label] += count
        if reason is None:
            self.measurable += count
        else:
            self.reasons[reason] += count
        if inferred:
            self.inferred += count
        distributions = self.figures
        for metric, value in numbers:
            distributions[metric].add(value, count)
        self.answers += answers * count
        self.nonconformant += nonconformant * count
        if answers:
            self.traces_with_answers += count
            if citing_nothing:
                self.traces_citing_nothing += count
            if invalid:
                self.traces_with_invalid += count
        self.retrievals += retrievals * count
        self.empty_retrievals += empty * count
        if duplicates is not None:
            self.duplicates += duplicates * count
            self.retrieved_items += items * count
        if positions is not None:
            self.sizes[size] += count
            for position in positions:
                self.positions[(size, position)] += count
        if depth is not None:
            top_k, placed_depth, in_context, retrieved = depth
            slot = self.by_top_k.get(top_k)
            if slot is None:
                slot = self.by_top_k[top_k] = {"depth": Distribution(), "in_context": Distribution(), "retrieved": Distribution()}
            slot["depth"].add(placed_depth, count)
            if in_context is not None:
                slot["in_context"].add(in_context, count)
            if retrieved is not None:
                slot["retrieved"].add(retrieved, count)

    def percentiles(self) -> dict[str, dict[str, float | None]]:
        return {
            metric: {f"p{p}": distribution.percentile(p) for p in PERCENTILES} | {"n": distribution.n}
            for metric, distribution in self.figures.items()
        }

    @property
    def nonconformant_share(self) -> float | None:
        return self.nonconformant / self.answers if self.answers else None

    @property
    def empty_retrieval_rate(self) -> float | None:
        return self.empty_retrievals / self.retrievals if self.retrievals else None


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


def contribution(row: Row, row_verdict: Verdict, numbers: tuple[tuple[str, float], ...]) -> Contribution:
    """Everything ``Group.apply`` needs from one row, as a hashable tuple (equal rows, equal tuples)."""
    figures = row.figures
    answers = row.answers
    duplicates = figures.get(METRIC_DUPLICATE_CHUNKS)
    if not isinstance(duplicates, int):
        duplicates = None
    size = figures.get(METRIC_IN_CONTEXT)
    positions = figures.get(METRIC_CITED_POSITIONS)
    known_positions = isinstance(size, int) and isinstance(positions, list)
    depth = None
    if row.top_k is not None and row.placed_depth is not None:
        retrieved = figures.get(METRIC_RETRIEVED)
        depth = (
            row.top_k,
            row.placed_depth,
            size if isinstance(size, int) else None,
            retrieved if isinstance(retrieved, int) else None,
        )
    return (
        row_verdict.label,
        None if row.measurable else (row.status[0] if row.status else "unknown"),
        row.inferred,
        numbers,
        answers,
        row.nonconformant,
        bool(answers) and row.nonconformant == answers,
        bool(answers) and bool(figures.get(METRIC_INVALID_CITATIONS)),
        row.retrievals,
        row.empty_retrievals,
        duplicates,
        row.retrieved_items if duplicates is not None else 0,
        size if known_positions else None,
        tuple(positions) if known_positions else None,
        depth,
    )


def summary_numbers(figures: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    """The summary figures of a row that are numbers, once per row for all its groups."""
    get = figures.get
    return tuple([(metric, value) for metric in SUMMARY_FIGURES if type(value := get(metric)) is int or type(value) is float])


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
                    value = "(other)"
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
            priority = (_SEVERITY[row_verdict.label], recall if isinstance(recall, (int, float)) else 2.0, row.time)
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
            elif p50 < bar:
                failures.append(f"{metric}: p50 {p50:.3f} < {bar:g}")
        return failures


def _percent(share: float) -> str:
    value = share * 100
    return f"{value:.0f}%" if value >= 1 or value == 0 else f"{value:.1f}%"


def recommend(group: Group, min_traces: int) -> list[str]:
    """Concrete advice, each only when the data of ``group`` supports it."""
    out: list[str] = []
    # 1. top_k larger than what ever reaches the prompt
    for top_k in sorted(group.by_top_k):
        slot = group.by_top_k[top_k]
        depth = slot["depth"]
        if depth.n < min_traces:
            continue
        needed = int(depth.percentile(90) or 0)
        in_context = slot["in_context"].percentile(50)
        retrieved = slot["retrieved"].percentile(50)
        if needed and needed < top_k and in_context is not None and retrieved is not None and in_context < retrieved:
            out.append(
                f"Reduce top_k {top_k}→{needed}: median {int(in_context)} of {int(retrieved)} retrieved chunks reach the prompt "
                f"(90% of traces use no chunk ranked below {needed})"
            )
    # 2. answers that cite nothing
    if group.traces_with_answers >= min_traces:
        share = group.traces_citing_nothing / group.traces_with_answers
        if share >= CITE_NOTHING_SHARE:
            out.append(f"Answers cite nothing in {_percent(share)} of traces: check the citation instruction")
        invalid = group.traces_with_invalid / group.traces_with_answers
        if invalid >= INVALID_CITATION_SHARE:
            out.append(f"Answers cite sources that are not in the prompt in {_percent(invalid)} of traces: check the labels the model is shown")
    # 3. lost in the middle
    sizes = Counter()
    for (size, _), count in group.positions.items():
        sizes[size] += count
    for size, cites in sizes.most_common(1):
        if size < MIN_MIDDLE_PROMPT or cites < min_traces:
            break
        distribution = Distribution()
        for (each, position), count in group.positions.items():
            if each == size:
                for _ in range(count):
                    distribution.add(position)
        low, high = int(distribution.percentile(25) or 0), int(distribution.percentile(75) or 0)
        if low > 1 and high < size and high - low + 1 <= size / 2:
            out.append(f"Cited chunks cluster mid-prompt (positions {low}–{high} of {size}): reorder by relevance so the best chunks come first")
    # 4. duplicates
    if group.retrieved_items and group.traces >= min_traces:
        share = group.duplicates / group.retrieved_items
        if share >= DUPLICATE_SHARE:
            out.append(f"{_percent(share)} of retrieved chunks are duplicates: deduplicate the index or the merged retrievals")
    # 5. empty retrievals
    if group.retrievals >= min_traces:
        share = group.empty_retrievals / group.retrievals
        if share >= EMPTY_RETRIEVAL_SHARE:
            out.append(f"{_percent(share)} of retrievals return nothing: check the index, filters and query rewriting")
    # 6. traces that can't be measured
    if group.traces >= min_traces:
        share = (group.traces - group.measurable) / group.traces
        if share >= NOT_MEASURABLE_SHARE and group.reasons:
            reason, _ = group.reasons.most_common(1)[0]
            out.append(f"{_percent(share)} of traces are not measurable (most often: {reason_text(reason)})")
    return out
