"""What a set of runs sums to (``Group``): counts, distributions of every figure, what recommendations need.

Memory is bounded by the number of *distinct* values, not runs: each figure is kept as a
value -> count map (``distribution.Distribution``), which gives exact percentiles because ratios
such as 3/10 repeat. What one row adds to a group is one hashable tuple (``contribution``), so
that the ``aggregator`` can count equal rows and apply them once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._internal.names import (
    FILE_PROXY_METRICS,
    METRIC_CITED,
    METRIC_CITED_POSITIONS,
    METRIC_CONTEXT_PRECISION,
    METRIC_CONTEXT_UTILIZATION,
    METRIC_DUPLICATE_CHUNKS,
    METRIC_IN_CONTEXT,
    METRIC_INVALID_CITATIONS,
    METRIC_OUT_OF_CONTEXT_CITATIONS,
    METRIC_RECALL_PROXY,
    METRIC_RECALL_PROXY_WEIGHTED,
    METRIC_RETRIEVED,
    METRIC_WASTED_CONTEXT_TOKENS,
)
from .distribution import Distribution
from .row import Row
from .verdicts import Verdict

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
    *FILE_PROXY_METRICS,  # runs whose citations name files (n counts those runs)
)

# what one row adds to a group: (verdict label, not-measurable reason or None, inferred, inclusion
# method or None, summary numbers, answers, nonconformant, cites nothing, (out-of-context,
# unknown) citations or None, retrievals, empty
# retrievals, duplicates or None, retrieved items, |C|, cited positions or None, (top_k, deepest
# placed rank, |C| or None, |R| or None) or None)
Contribution = tuple[Any, ...]


@dataclass(slots=True)
class Group:
    """Everything summarised about one set of rows (all, one pipeline, one version...)."""

    traces: int = 0
    measurable: int = 0
    inferred: int = 0
    inclusion: Counter[str] = field(default_factory=Counter)  # runs by how their context was known
    answers: int = 0
    nonconformant: int = 0
    traces_with_answers: int = 0
    traces_citing_nothing: int = 0
    traces_with_invalid: int = 0
    out_of_context_citations: int = 0  # naming a retrieved chunk the prompt did not show
    unknown_citations: int = 0  # naming nothing retrieved
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
        label, reason, inferred, inclusion, numbers, answers, nonconformant, citing_nothing, invalid, retrievals, empty, duplicates, items, size, positions, depth = item
        self.traces += count
        self.verdicts[label] += count
        if reason is None:
            self.measurable += count
        else:
            self.reasons[reason] += count
        if inferred:
            self.inferred += count
        if inclusion is not None:
            self.inclusion[inclusion] += count
        distributions = self.figures
        for metric, value in numbers:
            distributions[metric].add(value, count)
        self.answers += answers * count
        self.nonconformant += nonconformant * count
        if answers:
            self.traces_with_answers += count
            if citing_nothing:
                self.traces_citing_nothing += count
            if invalid is not None:
                self.traces_with_invalid += count
                self.out_of_context_citations += invalid[0] * count
                self.unknown_citations += invalid[1] * count
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

    def shown_figures(self) -> list[tuple[str, Distribution]]:
        """The summary figures a report shows: the file-level ones only where some run cites files."""
        return [(m, d) for m, d in self.figures.items() if d.n or m not in FILE_PROXY_METRICS]

    def percentiles(self) -> dict[str, dict[str, float | None]]:
        return {
            metric: {f"p{p}": distribution.percentile(p) for p in PERCENTILES} | {"n": distribution.n}
            for metric, distribution in self.shown_figures()
        }

    @property
    def nonconformant_share(self) -> float | None:
        return self.nonconformant / self.answers if self.answers else None

    @property
    def empty_retrieval_rate(self) -> float | None:
        return self.empty_retrievals / self.retrievals if self.retrievals else None


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
    invalid = figures.get(METRIC_INVALID_CITATIONS)
    if answers and isinstance(invalid, int) and invalid:
        out_of_context = figures.get(METRIC_OUT_OF_CONTEXT_CITATIONS)
        out_of_context = out_of_context if isinstance(out_of_context, int) else 0  # traces from before the split: all unknown
        invalid = (out_of_context, invalid - out_of_context)
    else:
        invalid = None
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
        row.inclusion,
        numbers,
        answers,
        row.nonconformant,
        bool(answers) and row.nonconformant == answers,
        invalid,
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
