"""examples/qdrant_rag.py run as a script: what it prints, the spans it exports, and the same output
without its ragtrace lines.

By hand: the query "How many days does a refund to my card take?" embeds as refund, card, days
(1 each). Point 1 (refund, card, days) scores cosine 1, point 2 (store, credit, refund) 1/3,
point 3 (shipping, free) 0: similarities, falling. The app shows 1 and 2 as [1], [2]; the answer
cites [1]. Retrieved 3, in context 2 (located), cited 1 at [1]: recall 1/3, utilisation 1/2.
"""

from __future__ import annotations

import math
from pathlib import Path

from test_examples import by_trace, example_env, figures, read_spans, root_of, run, run_ok, stage, without_ragtrace_lines

ENV = {"RAGTRACE_HASH_KEY": "examples"}


def test_qdrant_rag(tmp_path: Path):
    out = run_ok("qdrant_rag", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=example_env(**ENV))
    assert out == "A: Refunds take 5 business days [1].\n"
    (trace,) = by_trace(read_spans(tmp_path / "spans.jsonl")).values()
    root = root_of(trace)
    assert root["name"] == "invoke_workflow qdrant"
    retrieved = stage(trace, "retrieve")["attributes"]
    assert retrieved["rag.retrieval.chunk_ids"] == ["1", "2", "3"] and retrieved["rag.retrieval.score_kind"] == "similarity"
    assert retrieved["gen_ai.data_source.id"] == "kb" and retrieved["gen_ai.retrieval.top_k"] == 3
    assert stage(trace, "assemble")["attributes"]["rag.context.chunk_ids"] == ["1", "2"]
    assert stage(trace, "generate")["attributes"]["rag.citation.ids"] == ["1"]
    got = figures(root)
    assert (got["retrieved"], got["in_context"], got["cited"], got["cited_positions"]) == (3, 2, 1, [1])
    assert math.isclose(got["recall_proxy"], 1 / 3) and got["context_utilization"] == 0.5


def test_the_example_without_its_ragtrace_lines_is_the_same_app(tmp_path: Path):
    plain, ours = without_ragtrace_lines("qdrant_rag", tmp_path)
    assert ours == ["import ragtrace  # ragtrace", "ragtrace.configure", "ragtrace.instrument"]
    done = run(plain, cwd=tmp_path, env=example_env(**ENV))
    assert done.returncode == 0, done.stderr
    assert done.stdout == run_ok("qdrant_rag", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=example_env(**ENV))
