"""examples/haystack_rag.py with its stand-in generator, and without its ragtrace lines (the same output).

By hand: BM25 scores the refund document (a, refund, to, reach, card shared with the question) and
the store-credit one (a, refund) above zero and the shipping one at zero, which Haystack leaves
out; the builder shows the two as [1] and [2], and the stand-in answers with the first sentence
of [1], citing it. So retrieved 2, in context 2 (recorded), cited 1 at position [1], recall 1/2,
utilisation 1/2.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from test_examples import (
    by_trace,
    example_env,
    figures,
    read_spans,
    root_of,
    run,
    run_ok,
    stage,
    without_ragtrace_lines,
)

pytest.importorskip("haystack", reason="haystack-ai 3.x needs Python >= 3.11; installed for the 3.11 run")

pytestmark = pytest.mark.heavy

ANSWER = "A: A refund takes 5 business days to reach the original card [1]."


def env() -> dict[str, str]:
    return example_env(HAYSTACK_TELEMETRY_ENABLED="False")


def test_haystack_rag_gives_exact_figures(tmp_path: Path):
    out = run_ok("haystack_rag", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=env())
    assert out.strip() == ANSWER
    (trace,) = by_trace(read_spans(tmp_path / "spans.jsonl")).values()
    root = root_of(trace)
    assert root["name"] == "invoke_workflow haystack"
    assert len(stage(trace, "retrieve")["attributes"]["rag.retrieval.chunk_ids"]) == 2
    assert stage(trace, "assemble")["attributes"]["rag.context.labels"] == ["1", "2"]
    got = figures(root)
    assert (got["retrieved"], got["in_context"], got["cited"], got["cited_positions"], got["inclusion_method"]) == (2, 2, 1, [1], "recorded")
    assert math.isclose(got["recall_proxy"], 1 / 2) and math.isclose(got["context_utilization"], 1 / 2)


def test_haystack_rag_without_its_ragtrace_lines_is_the_same_app(tmp_path: Path):
    plain, ours = without_ragtrace_lines("haystack_rag", tmp_path)
    assert ours == ["import ragtrace  # ragtrace", "ragtrace.configure", "ragtrace.instrument"]
    done = run(plain, cwd=tmp_path, env=env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == run_ok("haystack_rag", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=env())
