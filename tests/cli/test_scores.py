"""Judge scores, end to end: record_score's spans and metric, then the report's join and quadrants.

The runs and scores below are chosen so that every count is worked out by hand (``EXPECTED``).
A judge "in another process" scores from the ids the pipeline wrote out, with its own providers
and its own export file; the report must give the same join for the files in either order.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tracemalloc
import types
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import ragtrace
from ragtrace._internal.setup import config
from ragtrace._internal.stages import generation, stage
from ragtrace._internal import names
from ragtrace.cli.row import Row
from ragtrace.cli.scores import RUNS_SPOOL_BYTES, Score, ScoreJoin

from .helpers import pipeline, provider_to

CITES = "BM25 ranks lexically [1]."  # cites one of the two retrieved chunks: recall proxy 0.5 (high)
CITES_NOTHING = "It depends."  # recall proxy 0.0 (low)
# (answer, groundedness scores); the proxy bar is the default 0.2, the score bar 0.7 (--score-threshold)
RUNS: list[tuple[str, list[float]]] = [
    (CITES, [0.9]), (CITES, [0.9]), (CITES, [0.9]), (CITES, [0.95]),  # healthy
    (CITES, [0.3]), (CITES, [0.2]),  # claims beyond its sources
    (CITES_NOTHING, [0.8]),  # right without leaning on retrieval
    (CITES_NOTHING, [0.1]), (CITES_NOTHING, [0.1]),  # broken
    (CITES, []),  # not scored
    (CITES, [0.6, 1.0]),  # scored twice: the mean 0.8 is high, so healthy
]
EXPECTED = {
    "healthy": 5,
    "claims_beyond_sources": 2,
    "right_without_retrieval": 1,
    "broken": 2,
}
# every groundedness score: the 11 in RUNS, one for the run without retrieval, one for a trace
# that is not in the input. Sorted: .1 .1 .2 .3 .6 .8 .9 .9 .9 .9 .9 .95 1 -> p50 (rank 7) = 0.9
ALL_SCORES = 13
P50 = 0.9


def write_runs(path: Path) -> list[tuple[str, str, list[float]]]:
    """The pipeline's own process: runs exported to ``path``; returns (trace id, root span id, scores)."""
    provider = provider_to(path)
    written = []
    for answer, scores in RUNS:
        with ragtrace.rag_pipeline("support-qa", query="What is BM25?", tracer_provider=provider, version="v1") as run:
            with ragtrace.retrieve("What is BM25?", tracer_provider=provider) as r:
                r.record([{"id": "d1", "content": "BM25 ranks."}, {"id": "d2", "content": "Dense embeds."}])
            with ragtrace.assemble(tracer_provider=provider) as ctx:
                for chunk in r.chunks:
                    ctx.add(chunk)
            with ragtrace.generate(model="m", prompt=ctx.render("{context}"), tracer_provider=provider) as g:
                g.record(answer)
        written.append((run.trace_id, run.span_id, scores))
    # a run without retrieval: scored, but it has no recall proxy to cross the score with
    with ragtrace.rag_pipeline("support-qa", query="hello", tracer_provider=provider) as run:
        with ragtrace.generate(model="m", tracer_provider=provider) as g:
            g.record("Hi.")
    written.append((run.trace_id, run.span_id, [0.9]))
    provider.shutdown()
    return written


def judge(path: Path, written: list[tuple[str, str, list[float]]], reader: InMemoryMetricReader) -> None:
    """The judge's process: its own providers; nothing of the runs but the ids read back."""
    config.reset()
    provider = provider_to(path, service="judge")
    ragtrace.configure(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[reader]))
    for trace_id, span_id, scores in written:
        for value in scores:
            ragtrace.record_score(
                trace_id=trace_id, span_id=span_id, name="groundedness", value=value, scorer="llm",
                label="pass" if value >= 0.7 else "fail", explanation="judged", pipeline="support-qa", version="v1",
            )
    ragtrace.record_score(trace_id="ab" * 16, span_id="cd" * 8, name="groundedness", value=0.9, scorer="human", pipeline="support-qa")
    first = written[0]
    ragtrace.record_score(trace_id=first[0], span_id=first[1], name="relevance", value=4, scorer="human", pipeline="support-qa")
    provider.shutdown()


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, Path, list[tuple[str, str, list[float]]], InMemoryMetricReader]:
    runs, scores = tmp_path / "runs.jsonl", tmp_path / "scores.jsonl"
    written = write_runs(runs)
    ids = tmp_path / "ids.json"  # what the pipeline wrote out for the judge
    ids.write_text(json.dumps(written))
    reader = InMemoryMetricReader()
    judge(scores, [tuple(item) for item in json.loads(ids.read_text())], reader)  # type: ignore[misc]
    return runs, scores, written, reader


def test_scores_are_spans_in_the_runs_traces_and_a_histogram(exported):
    runs, scores, written, reader = exported
    lines = [json.loads(line) for line in scores.read_text().splitlines()]
    spans = [s for line in lines for r in line["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    assert len(spans) == ALL_SCORES + 1
    first = spans[0]
    assert first["name"] == "evaluation groundedness"
    assert (first["traceId"], first["parentSpanId"]) == (written[0][0], written[0][1])
    (event,) = first["events"]
    assert event["name"] == names.GEN_AI_EVALUATION_RESULT
    attributes = {a["key"]: a["value"] for a in event["attributes"]}
    assert attributes[names.GEN_AI_EVALUATION_SCORE_VALUE] == {"doubleValue": 0.9}
    assert attributes[names.RAG_EVALUATION_SCORER] == {"stringValue": "llm"}
    data = reader.get_metrics_data()
    found = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    judged = found[names.METRIC_EVAL_SCORE].data.data_points
    points = [p for p in judged if p.attributes[names.RAG_EVAL_NAME] == "groundedness"]
    by_labels = {tuple(sorted(p.attributes.items())): p for p in points}
    scored = by_labels[((names.GEN_AI_WORKFLOW_NAME, "support-qa"), (names.RAG_EVAL_NAME, "groundedness"), (names.RAG_PIPELINE_VERSION, "v1"))]
    assert scored.count == ALL_SCORES - 1 and scored.sum == pytest.approx(sum(v for *_, s in written for v in s))
    (unknown,) = [p for p in points if p is not scored]
    assert dict(unknown.attributes) == {names.GEN_AI_WORKFLOW_NAME: "support-qa", names.RAG_EVAL_NAME: "groundedness"} and unknown.count == 1
    (relevance,) = [p for p in judged if p.attributes[names.RAG_EVAL_NAME] == "relevance"]
    assert relevance.sum == 4


@pytest.mark.parametrize("scores_first", [False, True], ids=["runs-then-scores", "scores-then-runs"])
def test_the_report_joins_scores_to_runs_in_any_order(cli, exported, scores_first):
    runs, scores, written, _ = exported
    files = [scores, runs] if scores_first else [runs, scores]
    result = cli("report", *files, "--json", "--score-threshold", "groundedness=0.7")
    assert result.code == 0, result.err
    assert "late span" not in result.err and "missing parent" not in result.err
    document = result.json()
    assert document["inputs"]["runs"] == len(RUNS) + 1  # score spans never become runs
    assert document["inputs"]["traces"] == len(RUNS) + 2  # nor count a trace twice (+1: the unknown run's)
    summary = document["scores"]["by_name"]["groundedness"]
    assert summary["scores"] == ALL_SCORES and summary["p50"] == P50
    assert summary["runs"] == 11 and summary["not_joined"] == 1 and summary["runs_without_proxy"] == 1
    assert summary["scorers"] == {"llm": ALL_SCORES - 1, "human": 1}
    assert summary["labels"] == {"pass": 7, "fail": 5}
    quadrants = summary["quadrants"]
    assert {key: q["runs"] for key, q in quadrants.items()} == EXPECTED
    assert quadrants["broken"]["share"] == pytest.approx(0.2)
    # the examples are the runs with the lowest scores in each quadrant, whatever the file order
    broken = sorted(written[7][0:1] + written[8][0:1])
    assert quadrants["broken"]["example_trace_ids"] == broken
    assert quadrants["claims_beyond_sources"]["example_trace_ids"] == [written[5][0], written[4][0]]
    assert quadrants["healthy"]["example_trace_ids"][0] == written[10][0]  # the mean 0.8 is the lowest
    assert document["scores"]["by_name"]["relevance"]["runs"] == 1
    recommendations = document["recommendations"]
    assert any(r.startswith("Retrieval or generation is broken in 20% of scored runs") for r in recommendations)
    assert any(r.startswith("Answers cite their sources but claim more than they say in 20%") for r in recommendations)
    assert not any("lean little on retrieval" in r for r in recommendations)  # 10% is below the 20% bar


def test_the_quadrant_table_in_text_markdown_and_html(cli, exported, tmp_path):
    runs, scores, written, _ = exported
    page = tmp_path / "report.html"
    text = cli("report", runs, scores, "--plain", "--score-threshold", "groundedness=0.7", "--html", page).out
    assert "Judge scores (joined to runs by trace id)" in text
    assert "recall_proxy (high ≥ 0.2) × groundedness (high ≥ 0.7): 10 runs" in text
    row = next(line for line in text.splitlines() if "retrieval or generation is broken" in line)
    assert row.split()[:2] == ["low", "low"] and " 2 " in row and "20%" in row
    assert written[7][0] in row and written[8][0] in row
    assert "1 run(s) scored on groundedness have no measurable recall_proxy" in text
    markdown = cli("report", runs, scores, "--markdown").out
    assert "### recall_proxy (high ≥ 0.2) × groundedness (high ≥ 0.5): 10 runs" in markdown
    assert "| low | low | retrieval or generation is broken |" in markdown
    html_text = page.read_text()
    assert "retrieval or generation is broken" in html_text and written[7][0] in html_text


def test_fail_under_gates_on_scores(cli, exported):
    runs, scores, _, _ = exported
    passed = cli("report", runs, scores, "--fail-under", "score.groundedness=0.9", "--rows", "0")
    assert passed.code == 0, passed.err
    failed = cli("report", runs, scores, "--fail-under", "score.groundedness=0.95,recall_proxy=0.1", "--rows", "0")
    assert failed.code == 1
    assert "score.groundedness: p50 0.900 < 0.95" in failed.err
    missing = cli("report", runs, "--fail-under", "score.faithfulness=0.5", "--rows", "0")
    assert missing.code == 1 and "score.faithfulness: no scores" in missing.err
    bad = cli("report", runs, "--fail-under", "score.=0.5")
    assert bad.code == 2


def test_a_scores_only_input_has_no_runs_and_no_bogus_rows(cli, exported):
    _, scores, _, _ = exported
    document = cli("report", scores, "--json").json()
    assert document["inputs"]["runs"] == 0
    assert document["scores"]["by_name"]["groundedness"]["not_joined"] == ALL_SCORES


def test_time_to_first_chunk_percentiles_per_pipeline(cli, tmp_path, monkeypatch):
    clock = types.SimpleNamespace(now=10.0)
    fake = types.SimpleNamespace(perf_counter=lambda: clock.now)
    monkeypatch.setattr(stage, "time", fake)
    monkeypatch.setattr(generation, "time", fake)
    path = tmp_path / "streams.jsonl"
    provider = provider_to(path)

    def pieces(first: float) -> Any:
        clock.now += first
        yield "a "
        clock.now += 0.01
        yield "b"

    for tenth in range(1, 11):  # qa: 0.1 ... 1.0 s to the first chunk
        with ragtrace.rag_pipeline("qa", tracer_provider=provider):
            with ragtrace.generate(model="m", tracer_provider=provider) as g:
                list(g.stream(pieces(tenth / 10)))
    with ragtrace.rag_pipeline("chat", tracer_provider=provider):
        with ragtrace.generate(model="m", tracer_provider=provider) as g:
            list(g.stream(pieces(2.0)))
    pipeline(provider, "batch", "q", ["d1"], ["d1"], "not streamed [1]")
    provider.shutdown()
    document = cli("report", path, "--json").json()
    table = document["streaming"]["time_to_first_chunk_seconds"]
    assert set(table) == {"qa", "chat"}  # the unstreamed pipeline has no time to first chunk
    assert table["qa"]["n"] == 10
    assert table["qa"]["p50"] == pytest.approx(0.5) and table["qa"]["p90"] == pytest.approx(0.9) and table["qa"]["p99"] == pytest.approx(1.0)
    assert table["chat"] == {"p50": pytest.approx(2.0), "p90": pytest.approx(2.0), "p99": pytest.approx(2.0), "n": 1}
    text = cli("report", path, "--plain").out
    assert "Time to first chunk by pipeline (seconds, streamed generations)" in text
    section = text.split("Time to first chunk by pipeline")[1].splitlines()
    qa = next(line for line in section if line.strip().startswith("qa "))
    assert qa.split() == ["qa", "10", "0.500", "0.900", "1.000"]


def test_eval_leaves_score_spans_out_of_its_runs(cli, exported, tmp_path):
    runs, scores, _, _ = exported
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"query": "What is BM25?", "relevant_ids": ["d1"]}) + "\n")
    for files in ([runs], [scores, runs], [runs, scores]):
        document = cli("eval", "--golden", golden, "--json", *files).json()
        assert document["inputs"]["runs"] == len(RUNS) + 1  # the same runs with or without the scores
        assert document["inputs"]["runs_not_in_golden_set"] == 1  # "hello"


def _rows(start: int, stop: int) -> Any:
    """Runs of one trace each, made as they are read (so only what the join keeps of them stays)."""
    for number in range(start, stop):
        yield Row(f"{number:032x}", f"{number:016x}", "runs.jsonl:1", figures={names.METRIC_RECALL_PROXY: (number % 4) / 4})


def _score(number: int, value: float, parent: str | None = None) -> Score:
    return Score(f"{number:032x}", parent or f"{number:016x}", "groundedness", value, None, "llm")


def test_the_join_keeps_no_per_run_state_in_memory():
    """Scores may come after their runs, but the runs' join fields are spooled, not kept: what the
    join holds after 100,000 runs is what it holds after 1,000 (it held some 370 bytes per run,
    37 MB here), and the scores still join the right runs at the end."""
    join = ScoreJoin(0.5)
    tracemalloc.start()
    try:
        join.add_rows(_rows(0, 1_000))
        small = tracemalloc.get_traced_memory()[0]
        join.add_rows(_rows(1_000, 100_000))
        large = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert large - small < RUNS_SPOOL_BYTES + 512 * 1024
    scores = [_score(number, value) for number, value in ((3, 0.9), (99_998, 0.1), (50_001, 0.7), (40, 0.2))]
    scores.append(_score(100_001, 0.9))  # no such run
    join._scores.extend(scores)  # noqa: SLF001 - as take() adds them, without building score spans
    join.finish()
    summary = join.summaries()["groundedness"]
    assert (summary.runs, summary.unjoined) == (4, 1)
    quadrants = {key: quadrant.example_ids() for key, quadrant in summary.quadrants.items() if quadrant.runs}
    # proxies (n % 4) / 4 against the bar 0.5: 3 -> 0.75, 99,998 -> 0.5, 50,001 -> 0.25, 40 -> 0.0
    assert quadrants == {
        "healthy": [f"{3:032x}"],
        "claims_beyond_sources": [f"{99_998:032x}"],
        "right_without_retrieval": [f"{50_001:032x}"],
        "broken": [f"{40:032x}"],
    }
    with pytest.raises(ValueError, match="after close"):
        join.add_rows(_rows(0, 1))


# --- the cap on distinct score names and labels -------------------------------------------------
def _one_score_line(tmp_path: Path) -> str:
    """One real record_score span exported as an OTLP-JSON line, with markers where its ids, name and
    label go (so a large file of distinct names is written in seconds, not built span by span)."""
    path = tmp_path / "one.jsonl"
    provider = provider_to(path, service="judge")
    ragtrace.record_score(
        trace_id="ab" * 16, span_id="cd" * 8, name="judge-marker", value=0.5, scorer="llm", label="label-marker", tracer_provider=provider,
    )
    provider.shutdown()
    line = path.read_text().strip()
    for old, new in (("ab" * 16, "@TRACE@"), ("cd" * 8, "@PARENT@"), ("judge-marker", "@NAME@"), ("label-marker", "@LABEL@")):
        assert old in line, old
        line = line.replace(old, new)
    return line


def _distinct_names(template: str, path: Path, count: int) -> None:
    with gzip.open(path, "wt") as out:
        for number in range(count):
            out.write(
                template.replace("@TRACE@", f"{number + 1:032x}").replace("@PARENT@", f"{number + 1:016x}")
                .replace("@NAME@", f"judge-{number}").replace("@LABEL@", f"label-{number}")
            )
            out.write("\n")


_PEAK = r"""
import json, os, resource, sys
from ragtrace.cli import main
code = main(sys.argv[1:])
with open(os.environ["PEAK_FILE"], "w") as out:
    json.dump({"code": code, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}, out)
"""


def _report_in_child(tmp_path: Path, *args: Any) -> tuple[int, int, str]:
    """``ragtrace report ARGS`` in a child process of this worktree: (exit code, peak RSS KiB, stdout)."""
    peak = tmp_path / "peak.json"
    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "PEAK_FILE": str(peak), "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", _PEAK, "report", *map(str, args)], capture_output=True, text=True, timeout=600, env=environment, cwd=tmp_path)
    measured = json.loads(peak.read_text())
    assert measured["code"] == done.returncode, done.stderr[-2000:]
    return done.returncode, measured["peak_kib"], done.stdout


@pytest.mark.heavy  # per decoder, three children reading 20,000 and 80,000 score spans: about 8 CPU-seconds
def test_a_file_of_distinct_score_names_keeps_the_report_flat(tmp_path, json_decoder):
    """The issue's file in small: every score span with its own name and label. Before, each name got
    a summary (400,000 names: 1.2 GB for the plain report, MemoryError for --json). Now the first 50 names are summarised and the rest counted, so the peak RSS
    at 80,000 names is within 32 MiB of that at 20,000, and both outputs say what was left out."""
    template = _one_score_line(tmp_path)
    small, large = tmp_path / "small.jsonl.gz", tmp_path / "large.jsonl.gz"
    _distinct_names(template, small, 20_000)
    _distinct_names(template, large, 80_000)
    # each score span is a trace of its own with a remote parent, held in the reader's window of
    # pending spans (its own bound, 100,000 spans by default): a small window leaves the join alone to grow
    window = ("--max-pending-spans", 2_000, "--decoder", json_decoder)
    code_small, peak_small, _ = _report_in_child(tmp_path, "--json", *window, small)
    code_large, peak_large, out = _report_in_child(tmp_path, "--json", *window, large)
    assert code_small == code_large == 0
    assert (peak_large - peak_small) / 1024 < 32, (peak_small, peak_large)
    scores = json.loads(out)["scores"]
    assert sorted(scores["by_name"]) == sorted(f"judge-{n}" for n in range(50))  # the first 50 read
    assert (scores["max_names"], scores["scores_over_cap"]) == (50, 79_950)
    code_plain, _, plain = _report_in_child(tmp_path, *window, large)
    assert code_plain == 0
    assert "79,950 score(s) under names beyond the first 50 were counted, not summarised" in plain


def test_labels_beyond_the_cap_count_as_other_and_gated_names_are_kept(cli, tmp_path):
    """52 labels of one name: the first 50 are counted each, the other 2 as "(other)". 51 names, then
    one more with a --fail-under gate: the 51st is over the cap and counted, the gated one is kept."""
    path = tmp_path / "scores.jsonl"
    provider = provider_to(path, service="judge")
    for number in range(52):
        ragtrace.record_score(trace_id=f"{number + 1:032x}", span_id="cd" * 8, name="faithfulness", value=0.9, scorer="llm", label=f"l{number}", tracer_provider=provider)
    for number in range(50):  # with faithfulness: 51 names
        ragtrace.record_score(trace_id="ab" * 16, span_id="cd" * 8, name=f"n{number}", value=0.5, scorer="code", tracer_provider=provider)
    ragtrace.record_score(trace_id="ab" * 16, span_id="cd" * 8, name="gated", value=0.25, scorer="human", tracer_provider=provider)
    provider.shutdown()
    document = cli("report", "--json", path).json()["scores"]
    labels = document["by_name"]["faithfulness"]["labels"]
    assert len(labels) == 51 and labels["(other)"] == 2 and labels["l49"] == 1 and "l50" not in labels
    assert "n49" not in document["by_name"] and "gated" not in document["by_name"]
    assert document["scores_over_cap"] == 2  # n49 and gated
    result = cli("report", "--json", path, "--fail-under", "score.gated=0.5")
    assert result.code == 1 and "score.gated: p50 0.250 < 0.5" in result.err
    gated = result.json()["scores"]
    assert gated["by_name"]["gated"]["scores"] == 1 and gated["scores_over_cap"] == 1  # only n49 left out
