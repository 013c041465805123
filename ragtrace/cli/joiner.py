"""Spans joined into traces by trace id, and when a trace counts as finished, in bounded memory.

A trace is finished once the span that is its root (no parent, or a remote parent) has come
and ``grace_spans`` more spans after it (0 by default), or at the end of input. Pending traces
are capped at ``max_pending_spans`` spans: the oldest are finished early, with a warning. The ids
of the last finished traces are remembered (``FinishedTraces``) to recognise late spans.
A pipeline that crossed a process (``ragtrace.inject`` / ``continue_pipeline``) has a root on each
side, each exported by its own process: a trace holding one side waits for the other (or the end
of input, or the pending cap) before it finishes, whichever file comes first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from .._internal.names import EVALUATION_SPAN_NAME, OP_WORKFLOW, RAG_PIPELINE_DELEGATED, RAG_STAGE, STAGE_SEGMENT
from .diagnostics import Diagnostics
from .finished import FinishedTraces
from .spans import Span, Trace

DEFAULT_GRACE_SPANS = 0  # finish a trace right after the line (or document) holding its root
DEFAULT_MAX_PENDING_SPANS = 100_000
_SCORE_SPAN = EVALUATION_SPAN_NAME + " "  # record_score's spans: joined to their runs by ScoreJoin
_FINISHED_MEMORY = 20_000  # finished trace ids remembered, to recognise late spans (bounded)
_WORKFLOW = OP_WORKFLOW + " "  # the span name of a pipeline root and of a pipeline segment
_DELEGATED, _SEGMENT, _BOTH = 1, 2, 3  # the sides of a cross-process pipeline seen (``Pending.sides``)


@dataclass(slots=True, eq=False)
class Pending:
    spans: list[Span] = field(default_factory=list)
    root_seen: bool = False
    sides: int = 0  # _DELEGATED | _SEGMENT: the sides of a cross-process pipeline seen so far


@dataclass(slots=True)
class ReadStats:
    files: int = 0
    bytes: int = 0
    lines: int = 0
    spans: int = 0
    traces: int = 0
    late_spans: int = 0
    evicted_traces: int = 0
    traces_without_runs: int = 0  # no retrieval or model call: index building, other work (counted by report.iter_rows)


class TraceJoiner:
    """Collects spans per trace id and hands out the traces that are finished."""

    def __init__(self, diagnostics: Diagnostics, stats: ReadStats, *, grace_spans: int, max_pending_spans: int) -> None:
        self.diagnostics = diagnostics
        self.stats = stats
        self.grace_spans = max(0, grace_spans)
        self.max_pending_spans = max(1, max_pending_spans)
        self.pending: dict[str, Pending] = {}  # trace id -> its spans so far, oldest trace first
        self.pending_spans = 0
        self._ready: deque[tuple[int, str]] = deque()  # (span count at which it is due, trace id)
        self._finished = FinishedTraces(_FINISHED_MEMORY)

    def append(self, span: Span) -> bool:
        """Join ``span`` to its pending trace; False when it arrived after its trace was finished."""
        trace_id, local_root = span.trace_id, span.local_root
        self.stats.spans += 1
        pending = self.pending.get(trace_id)
        # a score (record_score) may come before or after its run, from a judge whose span has a
        # remote parent: it is never late and never finishes a trace (ScoreJoin joins it)
        score = local_root and span.name.startswith(_SCORE_SPAN)
        if score:
            local_root = False
        if pending is None:
            if trace_id in self._finished and not (score or span.name.startswith(_SCORE_SPAN)):
                self.stats.late_spans += 1
                self.diagnostics.warn(
                    "late span",
                    span.where,
                    f"span {span.span_id} of trace {trace_id} arrived after its trace was finished and reported; "
                    "it is left out (pass files oldest first, or raise --grace-spans)",
                )
                return False
            pending = self.pending[trace_id] = Pending()
        pending.spans.append(span)
        self.pending_spans += 1
        if span.name.startswith(_WORKFLOW):
            side = _DELEGATED if span.get_bool(RAG_PIPELINE_DELEGATED) else _SEGMENT if span.get_str(RAG_STAGE) == STAGE_SEGMENT else 0
            if side and pending.sides | side == _BOTH and pending.sides != _BOTH and pending.root_seen:
                self._ready.append((self.stats.spans + self.grace_spans, trace_id))  # the other side came
            pending.sides |= side
        if local_root and not pending.root_seen:
            pending.root_seen = True
            self._ready.append((self.stats.spans + self.grace_spans, trace_id))
        return True

    def flush(self) -> Iterator[Trace]:
        """Traces whose root arrived long enough ago, then the oldest ones if too many are pending."""
        ready, seen = self._ready, self.stats.spans
        while ready and ready[0][0] <= seen:
            _, trace_id = ready.popleft()
            if trace_id in self.pending and self._complete(trace_id):
                yield self.finish(trace_id)
        while self.pending_spans > self.max_pending_spans and self.pending:
            trace_id = next(iter(self.pending))
            pending = self.pending[trace_id]
            if not pending.root_seen:
                first = pending.spans[0]
                self.stats.evicted_traces += 1
                self.diagnostics.warn(
                    "trace finished early",
                    first.where,
                    f"trace {trace_id}: no root span after {self.max_pending_spans:,} pending spans; "
                    "reported without it (raise --max-pending-spans if its root comes much later)",
                )
            yield self.finish(trace_id, evicted=not pending.root_seen)

    def due_before(self, last: dict[str, int], stop: int) -> Iterator[Trace]:
        """The traces due now whose last span in the line being read (``last``: trace id -> index
        of its last span there) comes before index ``stop``: the line holds no more of them."""
        ready, pending = self._ready, self.pending
        while ready and ready[0][0] <= self.stats.spans and last.get(ready[0][1], -1) < stop:
            trace_id = ready.popleft()[1]
            if trace_id in pending and self._complete(trace_id):
                yield self.finish(trace_id)

    def _complete(self, trace_id: str) -> bool:
        """False while a cross-process pipeline's trace has one side only: the other is awaited."""
        return self.pending[trace_id].sides in (0, _BOTH)

    def rest(self) -> Iterator[Trace]:
        """Every trace still pending (the end of input)."""
        for trace_id in list(self.pending):
            yield self.finish(trace_id)

    def finish(self, trace_id: str, *, evicted: bool = False) -> Trace:
        pending = self.pending.pop(trace_id)
        self.pending_spans -= len(pending.spans)
        if trace_id not in self._finished:  # seen again: scores that came after their run
            self._finished.add(trace_id)
            self.stats.traces += 1
        return Trace(trace_id, pending.spans, pending.root_seen, evicted)
