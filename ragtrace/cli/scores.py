"""Judge scores (``record_score``'s evaluation spans) joined to their runs: the four-quadrant diagnostic.

A score span may come before or after its run, in the same file or another, so nothing can be
joined while reading. Each run's join fields (trace id, root span id, recall proxy) are spooled to
a temporary file (memory up to ``RUNS_SPOOL_BYTES``, then disk), each score is kept as a small
record, and once everything is read one pass over the spool keeps only the runs of scored traces:
the report's memory stays flat however many runs it reads. A score joins the run of its trace whose root is the score span's
parent (or the trace's only run); several scores of one name for one run count as their mean.
Distinct score names are capped like group values (``MAX_GROUP_VALUES``): the first names read,
and every name given a bar or a gate, are summarised; scores of further names are only counted
(``over_cap``) and the report says so. Distinct labels and scorers per name go to ``OTHER`` beyond
the same cap, so a file of many one-off names or labels can't grow the report's memory.

The quadrants cross the recall proxy with each score: "high" is at or above a bar (the proxy's
verdict threshold, and ``--score-threshold`` for the score, default 0.5).
"""

from __future__ import annotations

import heapq
import json
import math
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO

from .._internal.names import (
    EVALUATION_SPAN_NAME,
    GEN_AI_EVALUATION_NAME,
    GEN_AI_EVALUATION_RESULT,
    GEN_AI_EVALUATION_SCORE_LABEL,
    GEN_AI_EVALUATION_SCORE_VALUE,
    METRIC_RECALL_PROXY,
    RAG_EVALUATION_SCORER,
    RAG_STAGE,
    STAGE_EVALUATION,
)
from .aggregate import PERCENTILES
from .aggregator import MAX_GROUP_VALUES, OTHER
from .distribution import Distribution
from .row import Row
from .settings import SCORE_PREFIX, below
from .spans import Span, Trace

DEFAULT_SCORE_BAR = 0.5
RUNS_SPOOL_BYTES = 1 << 20  # the runs' join fields kept in memory before they go to a temporary file
_BATCH_RUNS = 1024  # runs encoded together (and kept meanwhile: about 250 bytes each)
EXAMPLES = 3  # example trace ids per quadrant: those with the lowest scores
QUADRANT_SHARE = 0.2  # share of scored runs in a problem quadrant that makes a recommendation

HEALTHY = "healthy"
CLAIMS_BEYOND_SOURCES = "claims_beyond_sources"
RIGHT_WITHOUT_RETRIEVAL = "right_without_retrieval"
BROKEN = "broken"
# (key, proxy high, score high, what it means)
QUADRANTS = (
    (HEALTHY, True, True, "healthy"),
    (CLAIMS_BEYOND_SOURCES, True, False, "cites its sources but claims more than they say"),
    (RIGHT_WITHOUT_RETRIEVAL, False, True, "right without leaning on retrieval (or citing badly)"),
    (BROKEN, False, False, "retrieval or generation is broken"),
)
_SPAN_PREFIX = EVALUATION_SPAN_NAME + " "


@dataclass(slots=True)
class Score:
    trace_id: str
    parent_id: str
    name: str
    value: float
    label: str | None
    scorer: str | None


def score_spans(trace: Trace) -> list[Span]:
    """Take the evaluation spans out of ``trace`` (they are scores, not steps of a run)."""
    found = [span for span in trace.spans if span.name.startswith(_SPAN_PREFIX) and span.get_str(RAG_STAGE) == STAGE_EVALUATION]
    if found:
        taken = {id(span) for span in found}
        trace.spans = [span for span in trace.spans if id(span) not in taken]
    return found


def scores_of(span: Span) -> list[Score]:
    out = []
    for event in span.event_attributes(GEN_AI_EVALUATION_RESULT):
        name, value = event.get(GEN_AI_EVALUATION_NAME), event.get(GEN_AI_EVALUATION_SCORE_VALUE)
        if isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(name, str) or not isinstance(value, float) or not math.isfinite(value):
            span.source.diagnostics.warn("bad score", span.where, f"span {span.span_id}: an evaluation event without a name and a finite score; skipped")
            continue
        label, scorer = event.get(GEN_AI_EVALUATION_SCORE_LABEL), event.get(RAG_EVALUATION_SCORER)
        out.append(Score(span.trace_id, span.parent_id, name, value, label if isinstance(label, str) else None, scorer if isinstance(scorer, str) else None))
    return out


@dataclass(slots=True)
class Quadrant:
    members: list[tuple[float, str]] = field(default_factory=list)  # (score, trace id) of each run

    @property
    def runs(self) -> int:
        return len(self.members)

    def example_ids(self) -> list[str]:
        """The runs with the lowest scores (ties: lowest trace id): the same for any input order."""
        return [trace_id for _, trace_id in heapq.nsmallest(EXAMPLES, self.members)]


@dataclass(slots=True)
class ScoreSummary:
    """Everything the report says about one score name."""

    name: str
    bar: float
    distribution: Distribution = field(default_factory=Distribution)
    scorers: Counter[str] = field(default_factory=Counter)
    labels: Counter[str] = field(default_factory=Counter)
    runs: int = 0  # runs this score joined
    unjoined: int = 0  # scores whose run is not in the input
    unmeasured: int = 0  # joined runs without a recall proxy (not in the quadrants)
    quadrants: dict[str, Quadrant] = field(default_factory=lambda: {key: Quadrant() for key, *_ in QUADRANTS})

    @property
    def placed(self) -> int:
        return sum(q.runs for q in self.quadrants.values())

    def percentiles(self) -> dict[str, float | None]:
        return {f"p{p}": self.distribution.percentile(p) for p in PERCENTILES}


class ScoreJoin:
    """Collects runs and scores while the report reads, joins them at the end (``summaries``)."""

    def __init__(
        self, proxy_bar: float, score_bars: Mapping[str, float] | None = None, proxy: str = METRIC_RECALL_PROXY, *, always: Iterable[str] = ()
    ) -> None:
        """``always``: score names summarised whatever the cap (those gated on), like those in ``score_bars``."""
        self.proxy, self.proxy_bar = proxy, proxy_bar
        self.score_bars = dict(score_bars or {})
        self._always = set(self.score_bars) | set(always)
        self._batch: list[tuple[str, str, float | None]] = []  # (trace id, root span id, proxy) of the runs not spooled yet
        self._runs: IO[str] | None = None  # JSON lines, each a list of such triples
        self._closed = False
        self._scores: list[Score] = []
        self._names: set[str] = set()  # the score names summarised (at most MAX_GROUP_VALUES besides those with a bar)
        self.over_cap = 0  # scores of names beyond the cap: counted, not kept
        self._summaries: dict[str, ScoreSummary] | None = None

    def take(self, trace: Trace) -> bool:
        """Take the trace's scores out of it; False when nothing else is left in it."""
        self._check_open()
        spans = score_spans(trace)
        names, kept = self._names, self._scores
        for span in spans:
            for score in scores_of(span):
                name = score.name
                if name not in names:
                    if len(names) >= MAX_GROUP_VALUES and name not in self._always:
                        self.over_cap += 1
                        continue
                    names.add(name)
                kept.append(score)
        if spans:
            self._summaries = None
        return bool(trace.spans)

    def add_rows(self, rows: Iterable[Row]) -> None:
        self._check_open()
        batch = self._batch
        for row in rows:
            value = row.figures.get(self.proxy)
            proxy = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and row.measurable else None
            batch.append((row.trace_id, row.span_id, proxy))
        if len(batch) >= _BATCH_RUNS:
            self._spill()
        self._summaries = None

    def _spill(self) -> None:
        """The batched runs to the spool, as one JSON line (one encoder call per batch, not per run)."""
        if self._runs is None:
            self._runs = tempfile.SpooledTemporaryFile(max_size=RUNS_SPOOL_BYTES, mode="w+", encoding="utf-8")
        self._runs.write(_dumps(self._batch))
        self._runs.write("\n")
        self._batch.clear()

    def finish(self) -> None:
        """Join now and drop the spooled runs: once everything is read (``summaries`` keeps the result)."""
        self.summaries()
        self.close()

    def close(self) -> None:
        if self._runs is not None:
            self._runs.close()
            self._runs = None
        self._batch.clear()
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("ScoreJoin: runs or scores added after close()")

    @property
    def scored(self) -> bool:
        return bool(self._scores) or self.over_cap > 0

    def summaries(self) -> dict[str, ScoreSummary]:
        """Score name -> summary, joined now (every run and score read so far)."""
        if self._summaries is not None:
            return self._summaries
        summaries: dict[str, ScoreSummary] = {}
        runs = self._scored_runs()
        per_run: dict[tuple[str, str, str], list[float]] = {}  # (name, trace, root) -> values
        proxies: dict[tuple[str, str], float | None] = {}
        for score in self._scores:
            summary = summaries.get(score.name)
            if summary is None:
                summary = summaries[score.name] = ScoreSummary(score.name, self.score_bars.get(score.name, DEFAULT_SCORE_BAR))
            summary.distribution.add(score.value)
            summary.scorers[_capped(summary.scorers, score.scorer or "unknown")] += 1
            if score.label is not None:
                summary.labels[_capped(summary.labels, score.label)] += 1
            run = _run_of(score, runs)
            if run is None:
                summary.unjoined += 1
                continue
            per_run.setdefault((score.name, score.trace_id, run[0]), []).append(score.value)
            proxies[(score.trace_id, run[0])] = run[1]
        for (name, trace_id, root), values in sorted(per_run.items()):
            summary = summaries[name]
            summary.runs += 1
            proxy = proxies[(trace_id, root)]
            if proxy is None:
                summary.unmeasured += 1
                continue
            value = sum(values) / len(values)
            key = _quadrant(not below(proxy, self.proxy_bar), not below(value, summary.bar))
            summary.quadrants[key].members.append((value, trace_id))
        self._summaries = dict(sorted(summaries.items()))
        return self._summaries

    def _scored_runs(self) -> dict[str, list[tuple[str, float | None]]]:
        """Trace id -> (root span id, proxy) of each run, in input order, for the scored traces only."""
        runs: dict[str, list[tuple[str, float | None]]] = {}
        wanted = {score.trace_id for score in self._scores}
        if not wanted:
            return runs
        if self._batch:
            self._spill()
        spool = self._runs
        if spool is None:
            return runs
        spool.seek(0)
        for line in spool:
            for trace_id, span_id, proxy in json.loads(line):
                if trace_id in wanted:
                    runs.setdefault(trace_id, []).append((span_id, proxy))
        spool.seek(0, 2)  # more runs may follow
        return runs

    # -- recommendations and gates -----------------------------------------------------------------
    def recommendations(self, min_traces: int) -> list[str]:
        out = []
        for summary in self.summaries().values():
            placed = summary.placed
            if placed < min_traces:
                continue
            for key, advice in _ADVICE.items():
                quadrant = summary.quadrants[key]
                share = quadrant.runs / placed
                if share >= QUADRANT_SHARE:
                    examples = ", ".join(quadrant.example_ids())
                    out.append(advice.format(share=_percent(share), name=summary.name, bar=summary.bar, proxy=self.proxy, proxy_bar=self.proxy_bar) + f" (e.g. {examples})")
        return out

    def gate(self, fail_under: Mapping[str, float]) -> list[str]:
        """The ``score.<name>`` bars whose p50 over all scores of that name is below the bar."""
        failures = []
        summaries = self.summaries()
        for key, bar in fail_under.items():
            name = key[len(SCORE_PREFIX):]
            summary = summaries.get(name)
            p50 = summary.distribution.percentile(50) if summary is not None else None
            if p50 is None:
                failures.append(f"{key}: no scores (bar {bar:g})")  # a name with a bar is never over the cap
            elif below(p50, bar):
                failures.append(f"{key}: p50 {p50:.3f} < {bar:g}")
        return failures


_ADVICE = {
    BROKEN: "Retrieval or generation is broken in {share} of scored runs ({proxy} < {proxy_bar:g} and {name} < {bar:g}): read these traces first",
    CLAIMS_BEYOND_SOURCES: "Answers cite their sources but claim more than they say in {share} of scored runs ({proxy} ≥ {proxy_bar:g}, {name} < {bar:g}): instruct the model to answer only from the cited passages",
    RIGHT_WITHOUT_RETRIEVAL: "Answers score well on {name} but lean little on retrieval in {share} of scored runs ({proxy} < {proxy_bar:g}): check the citation instruction, and whether these queries need retrieval",
}


def _capped(counter: Counter[str], key: str) -> str:
    """``key``, or ``OTHER`` once ``counter`` holds ``MAX_GROUP_VALUES`` other keys."""
    return key if key in counter or len(counter) < MAX_GROUP_VALUES else OTHER


def _run_of(score: Score, runs: Mapping[str, list[tuple[str, float | None]]]) -> tuple[str, float | None] | None:
    """The run of its trace whose root is the score span's parent, or the trace's only run."""
    candidates = runs.get(score.trace_id)
    if not candidates:
        return None
    for run in candidates:
        if run[0] == score.parent_id:
            return run
    return candidates[0] if len(candidates) == 1 else None


_dumps = json.JSONEncoder(ensure_ascii=True, allow_nan=True, separators=(",", ":")).encode


def _quadrant(proxy_high: bool, score_high: bool) -> str:
    for key, proxy, score, _ in QUADRANTS:
        if proxy is proxy_high and score is score_high:
            return key
    raise AssertionError("unreachable")  # pragma: no cover


def _percent(share: float) -> str:
    value = share * 100
    return f"{value:.0f}%" if value >= 1 or value == 0 else f"{value:.1f}%"
