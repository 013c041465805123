"""The command line: exit codes, one-line errors, configuration, outputs, progress."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ragtrace.cli import EXIT_GATE, EXIT_INPUT, EXIT_OK, EXIT_USAGE

from .helpers import DATA, pipeline, provider_to

ROOT = Path(__file__).resolve().parents[2]


def test_fail_under_passes_and_fails_on_p50(cli, known):
    path = known[0]
    passed = cli("report", "--fail-under", "recall_proxy=0.5,context_precision=0.75", path)
    assert passed.code == EXIT_OK
    assert "Passed --fail-under" in passed.out
    failed = cli("report", "--fail-under", "recall_proxy=0.6", path)
    assert failed.code == EXIT_GATE
    assert failed.err.strip().splitlines()[-1] == "ragtrace: --fail-under: recall_proxy: p50 0.500 < 0.6"
    assert "FAILED --fail-under" in failed.out
    document = cli("report", "--json", "--fail-under", "recall_proxy=0.6", path)
    assert document.code == EXIT_GATE and document.json()["gate_failures"] == ["recall_proxy: p50 0.500 < 0.6"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "--fail-under", "recall=0.4"], "--fail-under: unknown figure 'recall'"),
        (["report", "--fail-under", "recall_proxy=high"], "--fail-under: recall_proxy needs a number, got 'high'"),
        (["report", "--fail-under", "recall_proxy=4"], "must be a number between 0 and 1"),
        (["report", "--threshold", "recall_proxy"], "--threshold: expected name=number"),
        (["report", "--rows", "-1"], "argument --rows: expected a number >= 0"),
        (["report", "--json", "--markdown"], "not allowed with argument"),
        (["report", "--bogus"], "unrecognized arguments: --bogus"),
        (["report"], "the following arguments are required: PATH"),
        (["eval"], "the following arguments are required"),
        (["report", "--config", "missing.toml"], "--config: missing.toml is not a file"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(cli, known, args, message):
    extra = [known[0]] if args not in (["report"], ["eval"], ["frobnicate"]) else []
    result = cli(*args, *extra)
    assert result.code == EXIT_USAGE
    assert result.err.startswith("ragtrace: error: ")
    assert message in result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err


def test_unreadable_input_is_one_line_and_exit_3(cli, known, tmp_path):
    result = cli("report", known[0], tmp_path / "missing.jsonl")
    assert result.code == EXIT_INPUT
    assert result.err == f"ragtrace: error: cannot read {tmp_path / 'missing.jsonl'}: No such file or directory\n"
    assert result.out == ""  # nothing is reported from a partial input set


def test_no_command_prints_help(cli):
    result = cli()
    assert result.code == EXIT_USAGE and "report" in result.err and "eval" in result.err


def test_internal_errors_never_show_a_traceback(cli, known, monkeypatch):
    from ragtrace.cli import text_output as render

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(render, "write_report_text", broken)
    result = cli("report", known[0])
    assert result.code == 70
    assert result.err == "ragtrace: internal error: RuntimeError: boom (RAGTRACE_DEBUG=1 shows the traceback)\n"
    monkeypatch.setenv("RAGTRACE_DEBUG", "1")
    assert "Traceback" in cli("report", known[0]).err


def test_a_trace_that_breaks_the_rebuild_is_a_warning(cli, known, monkeypatch):
    from ragtrace.cli import report

    calls = {"n": 0}
    original = report.rows_of

    def flaky(trace):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyError("odd")
        return original(trace)

    monkeypatch.setattr(report, "rows_of", flaky)
    result = cli("report", "--json", known[0])
    assert result.code == EXIT_OK
    assert "could not be read (KeyError: 'odd'); left out" in result.err
    assert len(result.json()["traces"]) == 4


def test_pyproject_thresholds_and_gates(cli, known, tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        "[project]\nname = 'x'\n\n[tool.ragtrace]\nthresholds = { recall_proxy = 0.6 }\nfail_under = { context_precision = 0.8 }\n"
    )
    monkeypatch.chdir(project / "sub")  # the nearest pyproject.toml is found in a parent
    result = cli("report", "--json", known[0])
    assert result.code == EXIT_GATE
    document = result.json()
    assert document["thresholds"]["recall_proxy"] == 0.6
    assert document["gate_failures"] == ["context_precision: p50 0.750 < 0.8"]
    rows = {r["query"]: r for r in document["traces"]}
    assert rows["What is BM25?"]["verdict"] == "check"  # 0.5 < 0.6 from pyproject
    # flags win over pyproject.toml, and --no-config ignores it
    overridden = cli("report", "--json", "--threshold", "recall_proxy=0.5", "--fail-under", "context_precision=0.7", known[0])
    assert overridden.code == EXIT_OK
    assert {r["query"]: r for r in overridden.json()["traces"]}["What is BM25?"]["verdict"] == "ok"
    assert cli("report", "--no-config", known[0]).code == EXIT_OK


def test_bad_pyproject_is_one_line_and_exit_2(cli, known, tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.ragtrace]\nthresholds = { recal = 0.3 }\n")
    result = cli("report", "--config", config, known[0])
    assert result.code == EXIT_USAGE
    assert result.err == f"ragtrace: error: {config}: thresholds: unknown figure 'recal' (one of context_precision, recall_proxy, recall_proxy_weighted, context_utilization)\n"
    config.write_text("[tool.ragtrace\n")
    assert "invalid TOML" in cli("report", "--config", config, known[0]).err


def test_output_file_and_html(cli, known, tmp_path):
    out, page = tmp_path / "report.md", tmp_path / "report.html"
    result = cli("report", "--markdown", "-o", out, "--html", page, known[0])
    assert result.code == EXIT_OK and result.out == ""
    assert out.read_text().startswith("## ragtrace report")
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    # the proxies, over time, cited positions, and one per labelled dimension: version, route, pipeline, top_k
    charts = re.findall(r'<div id="(chart-[\w-]+)" class="plotly-graph-div"', html)
    assert charts == ["chart-proxies", "chart-time", "chart-positions", "chart-by-version", "chart-by-route", "chart-by-pipeline", "chart-by-top_k"]
    assert "Cited share by prompt position" in html and "Proxies over time" in html
    assert html.count("Plotly.newPlot(") == len(charts)
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)=", html)  # plotly.js is inline: nothing is fetched
    unwritable = cli("report", "--html", tmp_path / "no" / "dir" / "x.html", known[0])
    assert unwritable.code == EXIT_USAGE and "--html: cannot write" in unwritable.err


def test_html_escapes_trace_text(cli, tmp_path):
    path = tmp_path / "xss.jsonl"
    provider = provider_to(path)
    pipeline(provider, "<b>bold</b>", "<script>alert(1)</script>", ["d1", "d2"], ["d1"], "[1]")
    provider.shutdown()
    page = tmp_path / "x.html"
    assert cli("report", "--html", page, path).code == EXIT_OK
    html = page.read_text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html


def test_eval_html(cli, known, tmp_path):
    golden = tmp_path / "golden.jsonl"
    golden.write_text('{"query": "How do rerankers work?", "relevant_ids": ["d7"]}\n{"query": "What is BM25?", "relevant_ids": ["d1"]}\n')
    page = tmp_path / "eval.html"
    assert cli("eval", "--golden", golden, "--html", page, known[0]).code == EXIT_OK
    html = page.read_text()
    assert re.findall(r'<div id="(chart-[\w-]+)" class="plotly-graph-div"', html) == ["chart-proxy-vs-recall", "chart-recall"]
    assert "recall_proxy vs recall@k" in html
    assert "Blind spots" in html and "How do rerankers work?" in html


def test_progress_bar_on_stderr(cli, known):
    result = cli("report", "--progress", known[0])
    assert result.code == EXIT_OK
    assert re.search(r"\r\[[#.]{28}\] +\d+\.\d% [\d.]+/[\d.]+ MB, [\d,]+ spans", result.err)
    assert "\r[" not in cli("report", known[0]).err  # small input, not a terminal: no bar


def test_quiet_and_warning_cap(cli, tmp_path, known):
    path = tmp_path / "bad.jsonl"
    path.write_text("x\n" * 5 + known[0].read_text())
    capped = cli("report", "--max-warnings", "2", path)
    assert capped.err.count("not valid JSON") == 2
    assert "3 more 'malformed line' warning(s) not shown (5 in all)" in capped.err
    assert cli("report", "-q", path).err == ""


@pytest.mark.parametrize("module", ["ragtrace", "ragtrace.cli"])
def test_python_dash_m(module, tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", module, "report", "--json", str(DATA / "phoenix_otlpv1.json")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert '"recall_proxy": 0.5' in completed.stdout
    failed = subprocess.run([sys.executable, "-m", module, "report", "nope.jsonl"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert failed.returncode == EXIT_INPUT and failed.stderr == "ragtrace: error: cannot read nope.jsonl: No such file or directory\n"


def test_version(cli):
    result = cli("--version")
    assert result.code == 0 and result.out.startswith("ragtrace ")
    assert result.out.rstrip().endswith(("(report path: compiled)", "(report path: pure Python)"))


@pytest.mark.compiled
def test_version_names_the_compiled_build(cli):
    assert cli("--version").out.rstrip().endswith("(report path: compiled)")  # what make test builds (test_compiled.py)


def test_bars_meet_figures_equal_to_them_up_to_rounding(cli, tmp_path):
    """Issue 14, item 5: cited ranks 2 and 3 of 4 give a weighted recall of exactly 2/5, which
    floating point computes as 0.3999999999999999: it meets a bar of 0.4, as a verdict and as a gate."""
    path = tmp_path / "two-fifths.jsonl"
    provider = provider_to(path)
    metrics = pipeline(provider, "qa", "What is BM25?", ["d1", "d2", "d3", "d4"], ["d1", "d2", "d3", "d4"], "See [2] and [3].")
    provider.shutdown()
    assert metrics["recall_proxy_weighted"] == 0.3999999999999999  # the float the issue reports
    bar = "recall_proxy_weighted=0.4"
    row = cli("report", "--json", "--threshold", bar, path).json()["traces"][0]
    assert row["verdict"] == "ok" and row["reasons"] == []
    gated = cli("report", "--threshold", bar, "--fail-under", bar, path)
    assert gated.code == EXIT_OK, gated.err
    assert "Passed --fail-under: recall_proxy_weighted p50 ≥ 0.4" in gated.out
    assert "0.3999" not in gated.out  # shown rounded
    missed = cli("report", "--fail-under", "recall_proxy_weighted=0.41", path)
    assert missed.code == EXIT_GATE and "recall_proxy_weighted: p50 0.400 < 0.41" in missed.err
