"""The report's judge-score and streaming sections, in text/Markdown, JSON and HTML."""

from __future__ import annotations

from html import escape
from typing import Any

from .html import _table as html_table
from .latency import LATENCY_PERCENTILES, StreamLatency
from .render import clean, number, percent
from .tables import Table, Writer
from .aggregator import MAX_GROUP_VALUES, OTHER
from .scores import QUADRANTS, ScoreJoin, ScoreSummary


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


def document(scores: ScoreJoin | None, latency: StreamLatency | None) -> dict[str, Any]:
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


# --- text and Markdown ----------------------------------------------------------------------------
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


def write_text(scores: ScoreJoin | None, latency: StreamLatency | None, writer: Writer) -> None:
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


# --- HTML -----------------------------------------------------------------------------------------
def html_sections(scores: ScoreJoin | None, latency: StreamLatency | None) -> list[str]:
    body: list[str] = []
    for table in _tables(scores, latency):
        body.append(f"<h2>{escape(table.title)}</h2>")
        body.append(html_table(table.headers, table.rows, table.right))
    dropped = over_cap_line(scores) if scores is not None else None
    if dropped is not None:
        body.append(f"<p>{escape(dropped)}</p>")
    return body


def _tables(scores: ScoreJoin | None, latency: StreamLatency | None) -> list[Table]:
    tables = []
    if scores is not None and scores.scored:
        tables.append(scores_table(scores))
        tables.extend(quadrant_table(scores, s) for s in scores.summaries().values() if s.runs)
    if latency is not None and latency.pipelines:
        tables.append(latency_table(latency))
    return tables
