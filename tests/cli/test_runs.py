"""The HTML report's drill-down (``ragtrace.cli.runs``): one run's chunks from its exported spans."""

from __future__ import annotations

import io

import ragtrace
from ragtrace.cli.diagnostics import Diagnostics
from ragtrace.cli.report import run_report
from ragtrace.cli.row import Row
from ragtrace.cli.runs import ChunkLine, chunk_lines
from ragtrace.cli.settings import Settings

from .helpers import DOCS, docs, provider_to, write_known


def _rows(path):
    result = run_report([str(path)], Settings(), Diagnostics(io.StringIO()))
    return {row.query: row for row, _ in result.aggregator.worst()}


def test_known_runs(tmp_path):
    path = tmp_path / "known.jsonl"
    write_known(path)
    rows = _rows(path)
    assert chunk_lines(rows["What is BM25?"]) == [
        ChunkLine("d1", 1, 1, True, None),
        ChunkLine("d2", 2, 2, True, None),
        ChunkLine("d3", 3, 3, False, None),
        ChunkLine("d4", 4, None, False, "never offered to the assembly"),
    ]
    assert chunk_lines(rows["How do rerankers work?"]) == [ChunkLine("d5", 1, 1, False, None), ChunkLine("d6", 2, 2, True, None)]
    assert chunk_lines(rows["What is a metadata filter?"]) == []
    assert chunk_lines(rows["hello"]) == []


def test_drop_reasons_budget_duplicates_and_the_users_own(tmp_path):
    path = tmp_path / "drops.jsonl"
    provider = provider_to(path)
    with ragtrace.rag_pipeline("qa", query="q", tracer_provider=provider):
        with ragtrace.retrieve("q", tracer_provider=provider) as r:
            r.record(docs("d1", "d2", "d3", "d4", "d5") + [dict(DOCS["d1"])])
        with ragtrace.assemble(max_tokens=12, tracer_provider=provider) as ctx:
            ctx.add(DOCS["d1"])
            ctx.add(DOCS["d1"])  # again: a duplicate
            ctx.drop(DOCS["d2"], "stale")
            ctx.drop(DOCS["d3"])
            ctx.add(DOCS["d4"])  # over the 12-token budget
            prompt = ctx.render(question="q")
        with ragtrace.generate(model="m", prompt=prompt, tracer_provider=provider) as g:
            g.record("Yes [1].")
    provider.shutdown()
    assert chunk_lines(_rows(path)["q"]) == [
        ChunkLine("d1", 1, 1, True, None),
        ChunkLine("d2", 2, None, False, "stale"),
        ChunkLine("d3", 3, None, False, "filtered out"),
        ChunkLine("d4", 4, None, False, "over the token budget"),
        ChunkLine("d5", 5, None, False, "never offered to the assembly"),
    ]


def test_a_row_from_other_instrumentations_has_no_chunk_record():
    assert chunk_lines(Row("t", "s", "f:1")) is None
