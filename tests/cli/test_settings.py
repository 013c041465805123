"""[tool.ragtrace] in pyproject.toml, and the name=value flags."""

from __future__ import annotations

import io

import pytest

from ragtrace.cli import settings
from ragtrace.cli.diagnostics import Diagnostics
from ragtrace.cli.settings import DEFAULT_THRESHOLDS, SettingsError, find_pyproject, load, parse_pairs


def test_full_table(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text(
        "[tool.ragtrace]\n"
        "thresholds = { recall_proxy = 0.3 }\n"
        "fail_under = { context_precision = 0.6 }\n"
        "min_traces = 20\n"
        "[tool.ragtrace.eval]\n"
        "k = 5\nlow_recall = 0.4\nfail_under = { ndcg = 0.5 }\n"
    )
    loaded = load(path)
    assert loaded.thresholds == {**DEFAULT_THRESHOLDS, "recall_proxy": 0.3}
    assert loaded.fail_under == {"context_precision": 0.6}
    assert (loaded.min_traces, loaded.eval_k, loaded.low_recall) == (20, 5, 0.4)
    assert loaded.eval_fail_under == {"ndcg": 0.5}
    assert loaded.source == str(path)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[tool.ragtrace]\ncolour = 1\n", "unknown key(s) in [tool.ragtrace]: colour"),
        ("[tool.ragtrace]\nmin_traces = 0\n", "min_traces must be a positive integer"),
        ("[tool.ragtrace]\nthresholds = 0.5\n", "thresholds must be a table"),
        ("[tool.ragtrace]\nfail_under = { recall_proxy = true }\n", "must be a number between 0 and 1"),
        ("[tool.ragtrace.eval]\nk = 'ten'\n", "eval.k must be a positive integer"),
        ("[tool.ragtrace.eval]\nfail_under = { recall_proxy = 0.5 }\n", "unknown figure 'recall_proxy'"),
    ],
)
def test_bad_tables(tmp_path, body, message):
    path = tmp_path / "pyproject.toml"
    path.write_text(body)
    with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        load(path)


def test_no_table_and_no_file_give_defaults(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text("[project]\nname = 'x'\n")
    assert load(path).thresholds == DEFAULT_THRESHOLDS and load(path).source is None
    assert load(None).fail_under == {}


def test_nearest_pyproject(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("")
    assert find_pyproject(tmp_path / "a" / "b") == tmp_path / "pyproject.toml"
    (tmp_path / "a" / "pyproject.toml").write_text("")
    assert find_pyproject(tmp_path / "a" / "b") == tmp_path / "a" / "pyproject.toml"


def test_python_310_without_a_toml_reader_falls_back(tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "_toml_loads", lambda: None)
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.ragtrace]\nthresholds = { recall_proxy = 0.9 }\n")
    stream = io.StringIO()
    loaded = load(path, Diagnostics(stream).warn)
    assert loaded.thresholds == DEFAULT_THRESHOLDS
    assert "without tomli can't read pyproject.toml; default thresholds used" in stream.getvalue()


def test_pairs():
    assert parse_pairs(" recall_proxy=0.4 , context_precision=.5,", settings.REPORT_GATES, "--x") == {"recall_proxy": 0.4, "context_precision": 0.5}
    with pytest.raises(SettingsError, match="expected name=number"):
        parse_pairs(",", settings.REPORT_GATES, "--x")
