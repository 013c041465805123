"""examples/gemini_file_search.py on its offline stand-in for the Gemini API, plain and streamed,
read back by ``ragtrace report``, and without its ragtrace lines (the same output).

By hand: the stand-in ranks refunds (5 words shared with the question: a, refund, to, reach,
card), store-credit (2: a, refund), shipping (0); the answer's first sentence, "Refunds
(Rückerstattungen) reach your card within 5 business days.", rests on chunk 0. So retrieved 3,
in context 3 (provider), cited 1 at position [1], recall 1/3, weighted recall 1 / (1 + 1/2 + 1/3)
= 6/11, utilisation 1/3, wasted tokens 10 + 9 (store-credit: 9 words and a full stop; shipping: 8
and one). The sentence is 66 characters and 67 UTF-8 bytes (one ü): the segment is [0, 66).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from test_examples import assert_same_app_without_ragtrace, by_trace, example_env, figures, read_spans, root_of, run_ok, stage

STORE = "fileSearchStores/support-kb"


def env() -> dict[str, str]:
    return {k: v for k, v in example_env(RAGTRACE_HASH_KEY="examples").items() if not k.startswith("GEMINI_")}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_gemini_file_search_gives_exact_figures(tmp_path: Path, stream):
    args = ["--stream"] if stream else []
    out = run_ok("gemini_file_search", *args, f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=env())
    assert "A: Refunds (Rückerstattungen) reach your card within 5 business days. Anything else?" in out
    assert "Cited: refunds" in out
    (trace,) = by_trace(read_spans(tmp_path / "spans.jsonl")).values()
    root = root_of(trace)
    assert root["name"] == "invoke_workflow google_genai"
    retrieved = stage(trace, "retrieve")["attributes"]
    assert retrieved["gen_ai.data_source.id"] == STORE
    assert [i.split("#")[0] for i in retrieved["rag.retrieval.chunk_ids"]] == [f"{STORE}/documents/{n}" for n in ("refunds", "store-credit", "shipping")]
    generated = stage(trace, "generate")["attributes"]
    assert (generated["rag.citation.segment_starts"], generated["rag.citation.segment_ends"]) == ([0], [66])
    assert generated.get("gen_ai.request.stream", False) is stream
    got = figures(root)
    assert (got["retrieved"], got["in_context"], got["cited"], got["cited_positions"]) == (3, 3, 1, [1])
    assert math.isclose(got["recall_proxy"], 1 / 3) and math.isclose(got["recall_proxy_weighted"], 6 / 11)
    assert math.isclose(got["context_utilization"], 1 / 3) and got["wasted_context_tokens"] == 19


def test_ragtrace_report_recomputes_the_same_figures(tmp_path: Path):
    spans = tmp_path / "spans.jsonl"
    run_ok("gemini_file_search", f"jsonl:{spans}", cwd=tmp_path, env=env())
    command = [sys.executable, "-m", "ragtrace.cli", "report", "--json", "--no-config", str(spans)]
    done = subprocess.run(command, cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["traces"]
    assert (row["inclusion"], row["verdict"], row["recorded_mismatch"], row["status"]) == ("provider", "ok", [], []), row
    assert (row["retrieved"], row["in_context"], row["cited"], row["cited_positions"], row["wasted_context_tokens"]) == (3, 3, 1, [1], 19)


def test_gemini_file_search_without_its_ragtrace_lines_is_the_same_app(tmp_path: Path):
    assert_same_app_without_ragtrace("gemini_file_search", tmp_path, env())
