"""The JSON output of both commands (``--json``): one document, the report's runs streamed into it
from the spool."""

from __future__ import annotations

import json
from typing import IO, TYPE_CHECKING, Any

from .aggregator import MAX_GROUP_VALUES
from .latency import StreamLatency
from .records import clean
from .render import group_summary, score_record
from .scores import ScoreJoin

if TYPE_CHECKING:
    from .eval import EvalResult
    from .report import ReportResult


def sections_document(scores: ScoreJoin | None, latency: StreamLatency | None) -> dict[str, Any]:
    """The ``scores`` and ``streaming`` members of ``report --json``."""
    out: dict[str, Any] = {}
    if scores is not None:
        out["scores"] = {
            "proxy": scores.proxy,
            "proxy_bar": scores.proxy_bar,
            "by_name": {name: score_record(summary) for name, summary in scores.summaries().items()},
            # the cap on distinct names (and on labels and scorers per name, beyond which they count as OTHER)
            "max_names": MAX_GROUP_VALUES,
            "scores_over_cap": scores.over_cap,
        }
    if latency is not None:
        out["streaming"] = {"time_to_first_chunk_seconds": latency.table()}
    return clean(out)


def report_document(result: ReportResult) -> dict[str, Any]:
    aggregator = result.aggregator
    stats = result.stats
    return {
        "command": "report",
        "inputs": {
            "files": result.files,
            "bytes": stats.bytes,
            "lines": stats.lines,
            "spans": stats.spans,
            "traces": stats.traces,
            "runs": result.runs,
            "traces_without_runs": stats.traces_without_runs,
            "late_spans": stats.late_spans,
            "traces_finished_early": stats.evicted_traces,
            "recorded_mismatches": aggregator.mismatched,
        },
        "thresholds": result.settings.thresholds,
        "summary": group_summary(aggregator.overall),
        "groups": {
            dimension: {value: group_summary(group) for value, group in sorted(groups.items())}
            for dimension, groups in aggregator.groups.items()
            if groups
        },
        **sections_document(result.scores, result.latency),
        "recommendations": result.recommendations(),
        "fail_under": result.settings.fail_under,
        "gate_failures": result.gate_failures,
        "series": clean(aggregator.series.points()),
    }


def write_report_json(result: ReportResult, out: IO[str]) -> None:
    """One JSON document; ``traces`` holds every run (streamed from the spool)."""
    head = json.dumps(report_document(result), ensure_ascii=False, indent=1, allow_nan=False)
    out.write(head[:-2] if head.endswith("\n}") else head[:-1])
    out.write(',\n "traces": [')
    spool = result.spool
    if spool is not None:
        spool.seek(0)
        first = True
        for line in spool:
            out.write("\n  " if first else ",\n  ")
            out.write(line.rstrip("\n"))
            first = False
    out.write("\n ]\n}\n")


def write_eval_json(result: EvalResult, out: IO[str]) -> None:
    json.dump(clean(result.document()), out, ensure_ascii=False, indent=1, allow_nan=False)
    out.write("\n")
