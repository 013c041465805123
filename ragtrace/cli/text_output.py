"""The terminal and Markdown output of both commands (``tables.Writer``: plain, ``rich`` when
installed, or Markdown)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .latency import StreamLatency
from .render import (
    figures_table,
    groups_table,
    inclusion_counts,
    input_line,
    latency_table,
    number,
    one_line,
    over_cap_line,
    percent,
    quadrant_table,
    runs_table,
    scores_table,
)
from .scores import ScoreJoin
from .tables import Table, Writer
from .verdicts import reason_text

if TYPE_CHECKING:
    from .eval import EvalResult
    from .report import ReportResult


def write_report_text(result: ReportResult, writer: Writer, warnings: int) -> None:
    aggregator = result.aggregator
    overall = aggregator.overall
    writer.heading("ragtrace report")
    writer.line(input_line(result, warnings))
    if result.stats.traces_without_runs:
        writer.line(f"{result.stats.traces_without_runs:,} trace(s) with no retrieval or model call (index building, other work) are not pipeline runs")
    inclusion = ", ".join(f"{method} {count:,}" for method, count in inclusion_counts(overall).items())
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
    write_sections(result.scores, result.latency, writer)
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
            spots.add(one_line(query.label), number(query.mean("recall_proxy")), number(query.mean("recall")), missing)
        writer.table(spots)
    else:
        writer.line("None.")
        writer.line()
    queries = Table("Per query", ["query", "traces", "k", "recall@k", "precision@k", "mrr", "ndcg@k", "recall_proxy"], [False] + [True] * 7)
    for query in result.queries_for_display():
        queries.add(
            one_line(query.label),
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


def write_sections(scores: ScoreJoin | None, latency: StreamLatency | None, writer: Writer) -> None:
    """Only the sections the input has data for."""
    if scores is not None and scores.scored:
        writer.table(scores_table(scores))
        dropped = over_cap_line(scores)
        if dropped is not None:
            writer.line(dropped)
            writer.line()
        for summary in scores.summaries().values():
            if summary.runs:
                writer.table(quadrant_table(scores, summary))
                if summary.unmeasured:
                    writer.line(f"{summary.unmeasured:,} run(s) scored on {summary.name} have no measurable {scores.proxy}: not in the table")
                    writer.line()
    if latency is not None and latency.pipelines:
        writer.table(latency_table(latency))
