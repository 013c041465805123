"""``ragtrace report``: read traces, score every pipeline run, aggregate, recommend, gate.

The reading, the per-run rows and the aggregation are streaming; only the worst ``rows`` runs
are kept in memory. For ``--json`` every row is spooled to a temporary file (memory up to 8 MB,
then disk) and copied into the output at the end.
"""

from __future__ import annotations

import gc
import json
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO

from .._internal.names import METRIC_RECALL_PROXY
from .aggregator import DEFAULT_GROUP_BY, Aggregator
from .diagnostics import Diagnostics, Progress, wants_progress
from .inputs import NoSpansError
from .latency import StreamLatency
from .records import row_record
from .reader import DECODER_AUTO, DEFAULT_GRACE_SPANS, DEFAULT_MAX_PENDING_SPANS, ReadStats, TraceReader
from .scores import ScoreJoin, score_spans
from .settings import SCORE_PREFIX, Settings
from .traces import Row, rows_of

_SPOOL_BYTES = 8 * 1024 * 1024
_COLLECT_EVERY = 20_000  # traces between explicit garbage collections while reading


@dataclass
class ReadOptions:
    grace_spans: int = DEFAULT_GRACE_SPANS
    max_pending_spans: int = DEFAULT_MAX_PENDING_SPANS
    progress: bool | None = None  # None: automatic (large input on a terminal)
    decoder: str = DECODER_AUTO  # JSON decoder: auto (msgspec when installed), msgspec or json


@dataclass
class ReportResult:
    stats: ReadStats
    aggregator: Aggregator
    settings: Settings
    runs: int = 0
    spool: IO[str] | None = None  # JSON lines, one row record per run (only with keep_rows)
    gate_failures: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    scores: ScoreJoin | None = None  # judge scores joined to the runs
    latency: StreamLatency | None = None  # time to first chunk per pipeline


    def recommendations(self) -> list[str]:
        """The aggregator's, then those the score quadrants support."""
        found = self.aggregator.recommendations()
        if self.scores is not None:
            found += self.scores.recommendations(self.aggregator.min_traces)
        return found


def open_reader(paths: Iterable[str], diagnostics: Diagnostics, options: ReadOptions) -> TraceReader:
    """A reader over ``paths`` (raises InputError for unreadable files), with a progress bar if due."""
    reader = TraceReader(
        paths, diagnostics, grace_spans=options.grace_spans, max_pending_spans=options.max_pending_spans, decoder=options.decoder
    )
    total = TraceReader.total_bytes(reader.files)
    if wants_progress(total, options.progress, diagnostics.stream):
        reader.progress = diagnostics.progress = Progress(total, diagnostics.stream)
    return reader


def iter_rows(
    reader: TraceReader, diagnostics: Diagnostics, scores: ScoreJoin | None = None, latency: StreamLatency | None = None
) -> Iterator[Row]:
    """Every pipeline run of every trace; a trace that breaks the rebuild is a warning, not a crash.
    Raises ``NoSpansError`` when the input held no span at all.

    Score spans (``record_score``) are taken out first: they go to ``scores``, never into a row.

    The cyclic garbage collector is paused while reading (parsed JSON is millions of acyclic
    containers; automatic collections would scan them over and over, about 20% of the time) and
    run explicitly every ``_COLLECT_EVERY`` traces instead, so memory stays bounded all the same.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        for count, trace in enumerate(reader, start=1):
            if count % _COLLECT_EVERY == 0:
                gc.collect()
            if scores is not None:
                if not scores.take(trace):
                    continue
            elif score_spans(trace) and not trace.spans:
                continue
            try:
                rows = rows_of(trace)
            except Exception as error:  # noqa: BLE001 - one odd trace must not end the report
                first = trace.spans[0]
                diagnostics.warn(
                    "unreadable trace",
                    first.where,
                    f"trace {trace.trace_id} could not be read ({type(error).__name__}: {error}); left out",
                )
                continue
            if not rows:
                reader.stats.traces_without_runs += 1
            if scores is not None:
                scores.add_rows(rows)
            if latency is not None:
                latency.add(trace, rows)
            yield from rows
    finally:
        if enabled:
            gc.enable()
    if reader.stats.spans == 0:
        raise NoSpansError(reader.files)


def run_report(
    paths: Iterable[str],
    settings: Settings,
    diagnostics: Diagnostics,
    *,
    options: ReadOptions | None = None,
    group_by: Iterable[str] = DEFAULT_GROUP_BY,
    rows: int = 25,
    keep_rows: bool = False,
) -> ReportResult:
    reader = open_reader(paths, diagnostics, options or ReadOptions())
    aggregator = Aggregator(settings.thresholds, group_by=group_by, rows=rows, min_traces=settings.min_traces)
    gated = [k[len(SCORE_PREFIX):] for k in settings.fail_under if k.startswith(SCORE_PREFIX)]
    scores = ScoreJoin(settings.thresholds.get(METRIC_RECALL_PROXY, 0.0), settings.score_thresholds, always=gated)
    result = ReportResult(reader.stats, aggregator, settings, files=[str(p) for p in reader.files], scores=scores, latency=StreamLatency())
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES, mode="w+", encoding="utf-8") if keep_rows else None
    try:
        for row in iter_rows(reader, diagnostics, result.scores, result.latency):
            row_verdict = aggregator.add(row)
            result.runs += 1
            if spool is not None:
                spool.write(json.dumps(row_record(row, row_verdict), ensure_ascii=False, allow_nan=False))
                spool.write("\n")
    finally:
        if reader.progress is not None:
            reader.progress.finish()
            diagnostics.progress = None
    scores.finish()
    result.spool = spool
    figures = {k: v for k, v in settings.fail_under.items() if not k.startswith(SCORE_PREFIX)}
    score_bars = {k: v for k, v in settings.fail_under.items() if k.startswith(SCORE_PREFIX)}
    result.gate_failures = aggregator.gate(figures) + scores.gate(score_bars)
    return result
