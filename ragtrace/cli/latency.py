"""Streaming latency per pipeline: the time to first chunk recorded on streamed generate spans."""

from __future__ import annotations

from collections.abc import Sequence

from .._internal.names import GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK
from .aggregator import MAX_GROUP_VALUES, OTHER
from .distribution import Distribution
from .row import Row
from .spans import Trace

LATENCY_PERCENTILES = (50, 90, 99)
UNKNOWN_PIPELINE = "(no pipeline)"


class StreamLatency:
    """Pipeline name -> distribution of the time to first chunk (seconds), over streamed generations."""

    def __init__(self) -> None:
        self.pipelines: dict[str, Distribution] = {}

    def add(self, trace: Trace, rows: Sequence[Row]) -> None:
        for span in trace.spans:
            if GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in span.attrs:
                continue
            seconds = span.get_number(GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
            if seconds is None or seconds != seconds or seconds < 0:
                continue
            name = _pipeline_of(span.parent_id, rows)
            distribution = self.pipelines.get(name)
            if distribution is None:
                if len(self.pipelines) >= MAX_GROUP_VALUES:
                    name = OTHER
                    distribution = self.pipelines.get(name)
                if distribution is None:
                    distribution = self.pipelines[name] = Distribution()
            distribution.add(float(seconds))

    def table(self) -> dict[str, dict[str, float | int | None]]:
        return {
            name: {f"p{p}": distribution.percentile(p) for p in LATENCY_PERCENTILES} | {"n": distribution.n}
            for name, distribution in sorted(self.pipelines.items())
        }


def _pipeline_of(parent_id: str, rows: Sequence[Row]) -> str:
    """The run whose root is the generation's parent, or the trace's only pipeline name."""
    for row in rows:
        if row.span_id == parent_id and row.pipeline:
            return row.pipeline
    known = {row.pipeline for row in rows if row.pipeline}
    return known.pop() if len(known) == 1 else UNKNOWN_PIPELINE
