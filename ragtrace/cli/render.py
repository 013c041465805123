"""Formatting helpers every output shares: numbers and shares as shown, the report's summary of a
group, and its tables (``tables.Table``, drawn by the terminal, Markdown and HTML outputs alike),
the judge-score and streaming tables among them.

Every run says how its context was known (``"inclusion"``: recorded, declared, provider (the model
API reported it), located, or inferred for traces of other instrumentations); figures resting on chunk text searched for in the
prompt (located, inferred) are shown with a ``~`` prefix in the tables. Figures that can't be
measured are ``-`` / ``null``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._internal import names
from .aggregate import PERCENTILES, Group
from .aggregator import MAX_GROUP_VALUES, OTHER
from .latency import LATENCY_PERCENTILES, StreamLatency
from .records import citation_text, clean, iso_time, shown_query
from .scores import QUADRANTS, ScoreJoin, ScoreSummary
from .tables import Table
from .verdicts import reason_text

if TYPE_CHECKING:
    from .eval import EvalResult
    from .report import ReportResult

_INCLUSION_ORDER = {method: index for index, method in enumerate(names.INCLUSION_METHODS)}


_QUERY_WIDTH = 40


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


def one_line(text: str | None, width: int = _QUERY_WIDTH) -> str:
    if not text:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def inclusion_counts(group: Group) -> dict[str, int]:
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
            "inclusion": inclusion_counts(group),
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
            one_line(shown_query(row)),
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


# --- the judge-score and streaming sections ------------------------------------------------------
def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def score_record(summary: ScoreSummary) -> dict[str, Any]:
    placed = summary.placed
    return {
        "scores": summary.distribution.n,
        **summary.percentiles(),
        "scorers": dict(summary.scorers),
        "labels": dict(summary.labels.most_common()),
        "runs": summary.runs,
        "not_joined": summary.unjoined,
        "runs_without_proxy": summary.unmeasured,
        "bar": summary.bar,
        "quadrants": {
            key: {
                "proxy_high": proxy_high,
                "score_high": score_high,
                "meaning": meaning,
                "runs": summary.quadrants[key].runs,
                "share": _share(summary.quadrants[key].runs, placed),
                "example_trace_ids": summary.quadrants[key].example_ids(),
            }
            for key, proxy_high, score_high, meaning in QUADRANTS
        },
    }


def scores_table(scores: ScoreJoin) -> Table:
    headers = ["score", "n", "runs", "not joined", "p25", "p50", "p90", "scorers", "labels"]
    table = Table("Judge scores (joined to runs by trace id)", headers, [False, True, True, True, True, True, True, False, False])
    for name, summary in scores.summaries().items():
        p = summary.percentiles()
        table.add(
            name,
            summary.distribution.n,
            summary.runs,
            summary.unjoined,
            number(p["p25"]),
            number(p["p50"]),
            number(p["p90"]),
            ", ".join(f"{k} {v}" for k, v in sorted(summary.scorers.items())),
            ", ".join(f"{k} {v}" for k, v in summary.labels.most_common(4)) or "-",
        )
    return table


def quadrant_table(scores: ScoreJoin, summary: ScoreSummary) -> Table:
    title = f"{scores.proxy} (high ≥ {scores.proxy_bar:g}) × {summary.name} (high ≥ {summary.bar:g}): {summary.placed} runs"
    table = Table(title, ["proxy", summary.name, "meaning", "runs", "share", "example trace ids"], [False, False, False, True, True, False])
    for key, proxy_high, score_high, meaning in QUADRANTS:
        quadrant = summary.quadrants[key]
        table.add(
            "high" if proxy_high else "low",
            "high" if score_high else "low",
            meaning,
            quadrant.runs,
            percent(_share(quadrant.runs, summary.placed)),
            ", ".join(quadrant.example_ids()) or "-",
        )
    return table


def latency_table(latency: StreamLatency) -> Table:
    headers = ["pipeline", "streams", *(f"p{p}" for p in LATENCY_PERCENTILES)]
    table = Table("Time to first chunk by pipeline (seconds, streamed generations)", headers, [False] + [True] * (len(headers) - 1))
    for name, row in latency.table().items():
        table.add(name, row["n"], *(_seconds(row[f"p{p}"]) for p in LATENCY_PERCENTILES))  # type: ignore[arg-type]
    return table


def over_cap_line(scores: ScoreJoin) -> str | None:
    """What the cap on distinct score names left out, or None when nothing."""
    if not scores.over_cap:
        return None
    return (
        f"{scores.over_cap:,} score(s) under names beyond the first {MAX_GROUP_VALUES} were counted, not summarised "
        f"(at most {MAX_GROUP_VALUES} distinct score names, besides those with a bar or a gate; labels and scorers "
        f"beyond {MAX_GROUP_VALUES} per name count as {OTHER})"
    )


def score_tables(scores: ScoreJoin | None, latency: StreamLatency | None) -> list[Table]:
    tables = []
    if scores is not None and scores.scored:
        tables.append(scores_table(scores))
        tables.extend(quadrant_table(scores, s) for s in scores.summaries().values() if s.runs)
    if latency is not None and latency.pipelines:
        tables.append(latency_table(latency))
    return tables
