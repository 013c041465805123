"""Text outputs of both commands: terminal tables (plain, or ``rich`` when installed), Markdown, JSON.

Every run says how its context was known (``"inclusion"``: recorded, declared, provider (the model
API reported it), located, or inferred for traces of other instrumentations); figures resting on chunk text searched for in the
prompt (located, inferred) are shown with a ``~`` prefix in the tables. Figures that can't be
measured are ``-`` / ``null``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from .._internal import names
from .aggregate import PERCENTILES, Group
from .tables import Table, Writer
from .verdicts import Verdict, reason_text
from .traces import Row

if TYPE_CHECKING:
    from .eval import EvalResult
    from .report import ReportResult

REDACTED = "(redacted)"
_INCLUSION_ORDER = {method: index for index, method in enumerate(names.INCLUSION_METHODS)}
_QUERY_WIDTH = 40
_ROW_FIGURES = (
    names.METRIC_RETRIEVED,
    names.METRIC_IN_CONTEXT,
    names.METRIC_CITED,
    names.METRIC_CONTEXT_PRECISION,
    names.METRIC_RECALL_PROXY,
    names.METRIC_RECALL_PROXY_WEIGHTED,
    names.METRIC_CONTEXT_UTILIZATION,
    names.METRIC_WASTED_CONTEXT_TOKENS,
    names.METRIC_DUPLICATE_CHUNKS,
    names.METRIC_INVALID_CITATIONS,
    names.METRIC_OUT_OF_CONTEXT_CITATIONS,
    names.METRIC_UNKNOWN_CITATIONS,
    names.METRIC_CITED_POSITIONS,
)


# --- values ---------------------------------------------------------------------------------------
def iso_time(time_ns: int) -> str | None:
    if not time_ns:
        return None
    try:
        moment = _dt.datetime.fromtimestamp(time_ns / 1e9, tz=_dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    return value


def shown_query(row: Row) -> str | None:
    if row.query is not None:
        return row.query
    if row.content_mode in ("redact", "hash"):
        return REDACTED
    return None


def citation_text(row: Row) -> str:
    if not row.answers:
        return "-"
    if row.nonconformant == 0:
        return "yes"
    if row.nonconformant == row.answers:
        return "none"
    return f"{row.answers - row.nonconformant}/{row.answers}"


def row_record(row: Row, row_verdict: Verdict) -> dict[str, Any]:
    """One run as a JSON object (the ``traces`` entries of ``report --json``)."""
    record: dict[str, Any] = {
        "trace_id": row.trace_id,
        "span_id": row.span_id,
        "time": iso_time(row.time),
        "pipeline": row.pipeline,
        "labels": row.labels,
        "query": shown_query(row),
        "query_id": row.query_id,
        "source": row.source,
        "inferred": row.inferred,
        "inclusion": row.inclusion,
        "top_k": row.top_k,
    }
    for metric in _ROW_FIGURES:
        record[metric] = row.figures.get(metric)
    record.update((m, row.figures[m]) for m in names.FILE_METRICS if m in row.figures)  # where citations name files
    record.update(
        {
            "answers": row.answers,
            "answers_without_citations": row.nonconformant,
            "citations": citation_text(row),
            "verdict": row_verdict.label,
            "reasons": list(row_verdict.reasons),
            "status": row.status,
            "recorded_mismatch": row.mismatches,
            "where": row.where,
        }
    )
    return clean(record)


def number(value: Any, inferred: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:.2f}"
    else:
        text = str(value)
    return "~" + text if inferred else text


def percent(share: float | None) -> str:
    if share is None:
        return "-"
    value = share * 100
    return f"{value:.0f}%" if value >= 1 or value == 0 else f"{value:.1f}%"


def _one_line(text: str | None, width: int = _QUERY_WIDTH) -> str:
    if not text:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


# --- report: shared document ----------------------------------------------------------------------
def _inclusion_counts(group: Group) -> dict[str, int]:
    """Runs by inclusion method: recorded, declared, provider, located, inferred first, then mixed ones."""
    counts = group.inclusion
    return {method: counts[method] for method in sorted(counts, key=lambda m: (_INCLUSION_ORDER.get(m, len(_INCLUSION_ORDER)), m))}


def group_summary(group: Group) -> dict[str, Any]:
    duplicates = group.duplicates / group.retrieved_items if group.retrieved_items else None
    return clean(
        {
            "traces": group.traces,
            "measurable": group.measurable,
            "not_measurable": group.traces - group.measurable,
            "inferred": group.inferred,
            "inclusion": _inclusion_counts(group),
            "verdicts": dict(group.verdicts),
            "not_measurable_reasons": {reason_text(k): v for k, v in group.reasons.items()},
            "figures": group.percentiles(),
            "answers": group.answers,
            "answers_without_citations": group.nonconformant,
            "answers_without_citations_share": group.nonconformant_share,
            "invalid_citations": {
                "traces": group.traces_with_invalid,
                "out_of_context": group.out_of_context_citations,
                "unknown": group.unknown_citations,
            },
            "retrievals": group.retrievals,
            "empty_retrievals": group.empty_retrievals,
            "empty_retrieval_rate": group.empty_retrieval_rate,
            "duplicate_share": duplicates,
        }
    )


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
        **result.sections_document(),
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


# --- report: text ---------------------------------------------------------------------------------
def figures_table(title: str, group: Group) -> Table:
    table = Table(title, ["figure", *(f"p{p}" for p in PERCENTILES), "n"], [False, True, True, True, True])
    for metric, distribution in group.shown_figures():
        table.add(metric, *(number(distribution.percentile(p)) for p in PERCENTILES), distribution.n)
    return table


def groups_table(dimension: str, groups: dict[str, Group]) -> Table:
    headers = [dimension, "runs", "measured", "inferred", "precision p50", "recall p50", "recall_w p50", "no-cite", "empty"]
    table = Table(f"By {dimension}", headers, [False] + [True] * (len(headers) - 1))
    for value in sorted(groups):
        group = groups[value]
        p50 = {m: group.figures[m].percentile(50) for m in names.PROXY_METRICS}
        table.add(
            value,
            group.traces,
            group.measurable,
            group.inferred,
            number(p50[names.METRIC_CONTEXT_PRECISION]),
            number(p50[names.METRIC_RECALL_PROXY]),
            number(p50[names.METRIC_RECALL_PROXY_WEIGHTED]),
            percent(group.nonconformant_share),
            percent(group.empty_retrieval_rate),
        )
    return table


def runs_table(result: ReportResult) -> Table:
    shown = result.aggregator.worst()
    title = f"Runs ({len(shown)} worst of {result.runs})" if len(shown) < result.runs else f"Runs ({result.runs})"
    headers = ["time (UTC)", "pipeline", "query", "|R|", "|C|", "|K|", "precision", "recall", "recall_w", "wasted_tok", "citations", "verdict"]
    table = Table(title, headers, [False, False, False, True, True, True, True, True, True, True, False, False])
    for row, row_verdict in shown:
        figures, inferred = row.figures, row.approximate
        table.add(
            (iso_time(row.time) or "-").replace("T", " ").rstrip("Z"),
            row.pipeline or "-",
            _one_line(shown_query(row)),
            number(figures.get(names.METRIC_RETRIEVED), inferred),
            number(figures.get(names.METRIC_IN_CONTEXT), inferred),
            number(figures.get(names.METRIC_CITED), inferred),
            number(figures.get(names.METRIC_CONTEXT_PRECISION), inferred),
            number(figures.get(names.METRIC_RECALL_PROXY), inferred),
            number(figures.get(names.METRIC_RECALL_PROXY_WEIGHTED), inferred),
            number(figures.get(names.METRIC_WASTED_CONTEXT_TOKENS), inferred),
            citation_text(row),
            str(row_verdict),
        )
    return table


def input_line(result: ReportResult | EvalResult, warnings: int) -> str:
    stats = result.stats
    return (
        f"{stats.files} file(s), {stats.bytes / 1_048_576:,.1f} MB, {stats.spans:,} spans, {stats.traces:,} traces, "
        f"{result.runs:,} pipeline runs; {warnings} warning(s)"
    )


def write_report_text(result: ReportResult, writer: Writer, warnings: int) -> None:
    aggregator = result.aggregator
    overall = aggregator.overall
    writer.heading("ragtrace report")
    writer.line(input_line(result, warnings))
    if result.stats.traces_without_runs:
        writer.line(f"{result.stats.traces_without_runs:,} trace(s) with no retrieval or model call (index building, other work) are not pipeline runs")
    inclusion = ", ".join(f"{method} {count:,}" for method, count in _inclusion_counts(overall).items())
    writer.line(
        f"{overall.measurable:,} measured, {overall.traces - overall.measurable:,} not measurable; "
        f"inclusion: {inclusion or 'none known'} (~ marks figures resting on located or inferred inclusion); "
        f"verdicts: " + ", ".join(f"{k} {v:,}" for k, v in sorted(overall.verdicts.items()))
    )
    if aggregator.mismatched:
        writer.line(f"{aggregator.mismatched:,} run(s) whose recomputed figures differ from those recorded online (see warnings)")
    writer.line()
    writer.table(figures_table("Figures over all runs (nearest-rank percentiles)", overall))
    duplicates = overall.duplicates / overall.retrieved_items if overall.retrieved_items else None
    writer.line(f"Answers without conformant citations: {percent(overall.nonconformant_share)} of {overall.answers:,}")
    if overall.traces_with_answers:
        writer.line(
            f"Invalid citations: {overall.out_of_context_citations + overall.unknown_citations:,} in {overall.traces_with_invalid:,} of "
            f"{overall.traces_with_answers:,} runs with an answer: {overall.out_of_context_citations:,} out of context (a retrieved chunk the "
            f"prompt did not show), {overall.unknown_citations:,} unknown (naming nothing retrieved)"
        )
    writer.line(f"Empty retrievals: {percent(overall.empty_retrieval_rate)} of {overall.retrievals:,}")
    writer.line(f"Duplicate chunks: {percent(duplicates)} of {overall.retrieved_items:,} retrieved")
    if overall.reasons:
        writer.line("Not measurable: " + ", ".join(f"{reason_text(k)} {v:,}" for k, v in overall.reasons.most_common()))
    writer.line()
    for dimension, groups in aggregator.groups.items():
        if groups and (len(groups) > 1 or dimension == "pipeline"):
            writer.table(groups_table(dimension, groups))
    result.write_sections(writer)
    recommendations = result.recommendations()
    writer.heading("Recommendations")
    writer.bullets(recommendations or ["None: no pattern in this data is strong enough to act on."])
    if aggregator.rows_limit:
        writer.table(runs_table(result))
    if result.settings.fail_under:
        if result.gate_failures:
            writer.line("FAILED --fail-under: " + "; ".join(result.gate_failures))
        else:
            writer.line("Passed --fail-under: " + ", ".join(f"{k} p50 ≥ {v:g}" for k, v in result.settings.fail_under.items()))


# --- eval: text -----------------------------------------------------------------------------------
def write_eval_text(result: EvalResult, writer: Writer, warnings: int) -> None:
    summary = result.summary()
    writer.heading("ragtrace eval")
    writer.line(input_line(result, warnings))
    writer.line(
        f"golden queries: {summary['golden']:,}, matched: {summary['matched']:,}, never traced: {summary['unmatched']:,}; "
        f"traces not in the golden set: {result.unlabelled:,}"
    )
    writer.line()
    table = Table("Retrieval quality (mean over matched queries)", ["figure", "mean"], [False, True])
    for key in ("recall", "precision", "mrr", "ndcg", "recall_proxy"):
        table.add(key if key in ("mrr", "recall_proxy") else f"{key}@k", number(summary["means"].get(key)))
    writer.table(table)
    rho = summary["spearman"]
    writer.line(
        f"Agreement of recall_proxy with recall@k: Spearman ρ = {number(rho)} over {summary['agreement_n']} queries"
        + ("" if rho is not None else " (needs 3+ queries with both figures, not all equal)")
    )
    writer.line()
    blind = result.blind_spots()
    writer.heading("Blind spots: proxy looks healthy, real recall is low")
    if blind:
        spots = Table(
            f"{len(blind)} quer{'y' if len(blind) == 1 else 'ies'} (recall_proxy ≥ {result.proxy_bar:g}, recall@k < {result.low_recall:g})",
            ["query", "recall_proxy", "recall@k", "relevant never retrieved"],
            [False, True, True, False],
        )
        for query in blind:
            missing = ", ".join(query.never_retrieved[:5]) + (" …" if len(query.never_retrieved) > 5 else "")
            spots.add(_one_line(query.label), number(query.mean("recall_proxy")), number(query.mean("recall")), missing)
        writer.table(spots)
    else:
        writer.line("None.")
        writer.line()
    queries = Table("Per query", ["query", "traces", "k", "recall@k", "precision@k", "mrr", "ndcg@k", "recall_proxy"], [False] + [True] * 7)
    for query in result.queries_for_display():
        queries.add(
            _one_line(query.label),
            query.traces,
            query.k_text(),
            number(query.mean("recall")),
            number(query.mean("precision")),
            number(query.mean("mrr")),
            number(query.mean("ndcg")),
            number(query.mean("recall_proxy")),
        )
    writer.table(queries)
    if result.fail_under:
        if result.gate_failures:
            writer.line("FAILED --fail-under: " + "; ".join(result.gate_failures))
        else:
            writer.line("Passed --fail-under: " + ", ".join(f"{k} ≥ {v:g}" for k, v in result.fail_under.items()))


def write_eval_json(result: EvalResult, out: IO[str]) -> None:
    json.dump(clean(result.document()), out, ensure_ascii=False, indent=1, allow_nan=False)
    out.write("\n")


Renderer = Callable[[Any, Writer, int], None]
