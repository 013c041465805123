"""``ragtrace eval``: golden-set matching, IR figures, agreement with the proxy, blind spots."""

from __future__ import annotations

import io
import json
import logging
import math
from pathlib import Path

import pytest

from ids import HASH_KEY
from ragtrace._internal.core import keyed
from ragtrace.cli.diagnostics import Diagnostics
from ragtrace.cli.eval import GoldenError, load_golden, retrieval_metrics, spearman

from .helpers import pipeline, provider_to


def _golden(path: Path, *items: object) -> Path:
    path.write_text("".join((item if isinstance(item, str) else json.dumps(item)) + "\n" for item in items))
    return path


GOLDEN = (
    {"query": "  what is  BM25? ", "relevant_ids": ["d1", "d9"]},  # matched by normalised text
    {"query_id": "q-2", "relevant_ids": ["d3"]},  # matched by rag.query.id
    {"query": "How do rerankers work?", "relevant_ids": ["d7", "d8"]},  # proxy 0.5, never retrieved
    {"query": "Something nobody asked", "relevant_ids": ["d1"]},
)


def test_metric_formulas():
    assert retrieval_metrics(["a", "b", "c", "d"], ["a", "z"], 4) == {
        "recall": 0.5,
        "precision": 0.25,
        "mrr": 1.0,
        "ndcg": 1 / (1 + 1 / math.log2(3)),
    }
    got = retrieval_metrics(["a", "b", "c", "d"], ["c"], 4)
    assert got == {"recall": 1.0, "precision": 0.25, "mrr": 1 / 3, "ndcg": 0.5}
    # the cut-off applies: c at rank 3 is outside the top 2
    assert retrieval_metrics(["a", "b", "c"], ["c"], 2) == {"recall": 0.0, "precision": 0.0, "mrr": 0.0, "ndcg": 0.0}
    assert retrieval_metrics([], ["c"], 3)["recall"] == 0.0


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([0.5, 0.0, 0.5], [0.5, 1.0, 0.0]) == pytest.approx(-math.sqrt(3) / 2)  # ties averaged
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert spearman([1, 2], [1, 2]) is None


def test_known_eval(cli, known, tmp_path):
    golden = _golden(tmp_path / "golden.jsonl", *GOLDEN)
    result = cli("eval", "--golden", golden, "--json", known[0])
    assert result.code == 0 and result.err == ""
    document = result.json()
    queries = {q["query"] or q["query_id"]: q for q in document["queries"]}
    bm25 = queries["  what is  BM25? "]
    assert bm25["traces"] == 1 and bm25["k"] == [4]  # k = the run's top_k
    assert (bm25["recall"], bm25["precision"], bm25["mrr"]) == (0.5, 0.25, 1.0)
    assert bm25["ndcg"] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert bm25["recall_proxy"] == 0.5
    by_id = queries["q-2"]
    assert (by_id["recall"], by_id["precision"], by_id["mrr"], by_id["ndcg"]) == (1.0, 0.25, 1 / 3, 0.5)
    assert by_id["recall_proxy"] == 0.0
    rerank = queries["How do rerankers work?"]
    assert (rerank["recall"], rerank["ndcg"], rerank["recall_proxy"]) == (0.0, 0.0, 0.5)
    assert rerank["never_retrieved"] == ["d7", "d8"]
    nobody = queries["Something nobody asked"]
    assert nobody["traces"] == 0 and nobody["recall"] is None

    summary = document["summary"]
    assert (summary["golden"], summary["matched"], summary["unmatched"]) == (4, 3, 1)
    assert summary["means"]["recall"] == pytest.approx(0.5)
    assert summary["spearman"] == pytest.approx(-math.sqrt(3) / 2)
    assert summary["agreement_n"] == 3
    assert document["inputs"]["runs_not_in_golden_set"] == 2  # the empty retrieval and chat-only runs
    (blind,) = document["blind_spots"]
    assert blind["query"] == "How do rerankers work?"


def test_k_flag_overrides_top_k(cli, known, tmp_path):
    golden = _golden(tmp_path / "golden.jsonl", {"query_id": "q-2", "relevant_ids": ["d3"]})
    document = cli("eval", "--golden", golden, "--k", "2", "--json", known[0]).json()
    (query,) = document["queries"]
    assert query["k"] == [2] and query["recall"] == 0.0  # d3 is ranked 3rd


def test_redacted_runs_are_matched_by_the_recorded_hash(cli, tmp_path):
    path = tmp_path / "redacted.jsonl"
    provider = provider_to(path)
    pipeline(provider, "private", "Which plan includes SSO?", ["d1", "d2", "d3"], ["d1"], "[1]", capture_content="redact")
    provider.shutdown()
    assert "SSO" not in path.read_text()
    golden = _golden(tmp_path / "golden.jsonl", {"query": "which plan INCLUDES sso?", "relevant_ids": ["d2"]})
    document = cli("eval", "--golden", golden, "--json", path).json()
    (query,) = document["queries"]
    assert query["traces"] == 1
    assert query["recall"] == 1.0 and query["mrr"] == 0.5


def test_joining_by_hash_without_the_applications_key_warns_once_and_matches_nothing(cli, tmp_path, no_hash_key, caplog):
    """The app ran under its key; eval, given none, hashes the golden set with a random one."""
    redacted, full = tmp_path / "redacted.jsonl", tmp_path / "full.jsonl"
    keyed.set_key(HASH_KEY.encode())
    for path, mode in ((redacted, "redact"), (full, "full")):
        provider = provider_to(path)
        for _ in range(2):
            pipeline(provider, "private", "Which plan includes SSO?", ["d1", "d2"], ["d1"], "[1]", capture_content=mode)
        provider.shutdown()
    keyed.set_key(None)
    golden = _golden(tmp_path / "golden.jsonl", {"query": "which plan INCLUDES sso?", "relevant_ids": ["d2"]})
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        by_text = cli("eval", "--golden", golden, "--json", full).json()
        assert [m.getMessage() for m in caplog.records] == []  # the traces' text joins them: no key needed
        by_hash = cli("eval", "--golden", golden, "--json", redacted).json()
    assert by_text["queries"][0]["traces"] == 2 and by_hash["queries"][0]["traces"] == 0
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "the golden set's query hashes can't match the traces' rag.query.hash" in warning and "RAGTRACE_HASH_KEY" in warning


def test_text_output_lists_blind_spots(cli, known, tmp_path):
    golden = _golden(tmp_path / "golden.jsonl", *GOLDEN)
    result = cli("eval", "--golden", golden, "--plain", known[0])
    assert result.code == 0
    out = result.out
    assert "golden queries: 4, matched: 3, never traced: 1" in out
    assert "Spearman ρ = -0.87 over 3 queries" in out
    blind = out[out.index("Blind spots") : out.index("Per query")]
    assert "How do rerankers work?" in blind and "d7, d8" in blind
    assert "what is  BM25?" not in blind


def test_fail_under_gates_on_means(cli, known, tmp_path):
    golden = _golden(tmp_path / "golden.jsonl", *GOLDEN)
    failing = cli("eval", "--golden", golden, "--fail-under", "recall=0.6", known[0])
    assert failing.code == 1
    assert "ragtrace: --fail-under: recall: mean 0.500 < 0.6" in failing.err
    assert cli("eval", "--golden", golden, "--fail-under", "recall=0.5,mrr=0.4", known[0]).code == 0
    bad = cli("eval", "--golden", golden, "--fail-under", "recall_proxy=0.5", known[0])
    assert bad.code == 2 and "unknown figure 'recall_proxy'" in bad.err


def test_golden_file_problems(tmp_path):
    golden = _golden(
        tmp_path / "golden.jsonl",
        "not json",
        {"relevant_ids": ["a"]},
        {"query": "q", "relevant_ids": "a"},
        {"query": "q", "relevant_ids": []},
        {"query": "q", "relevant_ids": ["a", "a", 7], "k": 0},
        "[1, 2]",
    )
    stream = io.StringIO()
    (query,) = load_golden(str(golden), Diagnostics(stream))
    assert query.relevant == ("a", "7") and query.k is None
    text = stream.getvalue()
    for line, message in ((1, "not valid JSON"), (2, "needs a query"), (3, "relevant_ids must be a list"), (4, "relevant_ids is empty"), (5, "k must be a positive integer"), (6, "not a JSON object")):
        assert f"{golden}:{line}: {message}" in text
    empty = _golden(tmp_path / "empty.jsonl", "nothing here")
    with pytest.raises(GoldenError, match="no usable golden query"):
        load_golden(str(empty), Diagnostics(io.StringIO()))


def test_golden_errors_exit_cleanly(cli, known, tmp_path):
    missing = cli("eval", "--golden", tmp_path / "nope.jsonl", known[0])
    assert missing.code == 3 and missing.err.startswith("ragtrace: error: cannot read") and missing.err.count("\n") == 1
    empty = _golden(tmp_path / "empty.jsonl", "{}")
    result = cli("eval", "--golden", empty, known[0])
    assert result.code == 2 and "no usable golden query" in result.err
    assert "Traceback" not in result.err


def test_eval_bars_meet_means_equal_to_them_up_to_rounding():
    """(0.7 + 0.1) / 2 is 0.39999999999999997 in floating point: it meets a bar of 0.4."""
    from ragtrace.cli.eval import EvalResult, GoldenQuery
    from ragtrace.cli.joiner import ReadStats

    queries = [GoldenQuery(1, "a", None, ["x"]), GoldenQuery(2, "b", None, ["y"])]
    for query, recall in zip(queries, (0.7, 0.1)):
        query.add("recall", recall)
        query.add("recall_proxy", 0.3999999999999999)
    result = EvalResult(ReadStats(), "golden.jsonl", queries, proxy_bar=0.4, low_recall=0.5, k=None, rows_limit=10, fail_under={"recall": 0.4})
    assert result.means()["recall"] < 0.4
    assert result.gate() == []
    assert [q.query for q in result.blind_spots()] == ["b"]  # proxy at its bar counts as healthy


def test_a_golden_set_is_held_compactly(tmp_path) -> None:
    """Golden entries are held whole while traces stream past: measured with tracemalloc, 20,000
    lines of a 40-character query and 2 ids take under 600 B each (a plain dataclass with its
    empty dicts and sets per entry took about 1,150), index included."""
    import tracemalloc

    from ragtrace.cli.diagnostics import Diagnostics
    from ragtrace.cli.eval import _Index, load_golden

    path = tmp_path / "golden.jsonl"
    count = 20_000
    path.write_text("".join(json.dumps({"query": f"how long do refunds take for order {i:05d}?", "relevant_ids": [f"kb-{i}", f"kb-{i + 1}"]}) + "\n" for i in range(count)))
    tracemalloc.start()
    try:
        queries = load_golden(str(path), Diagnostics())
        index = _Index(queries, Diagnostics(), str(path))
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(queries) == count and len(index.by_hash) == count
    assert held / count < 600, held / count
