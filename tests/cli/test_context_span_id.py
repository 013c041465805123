"""rag.generation.context_span_id: offline, an answer is scored against the assembly the SDK names."""

from __future__ import annotations

import io
import json
from pathlib import Path

import ragtrace
from ragtrace._internal import names
from ragtrace.cli.diagnostics import Diagnostics
from ragtrace.cli.reader import TraceReader
from ragtrace.cli.traces import rows_of

from .helpers import DOCS, docs, provider_to, tokens


def _two_assemblies(path: Path) -> dict:
    """Two assemblies of the same size that both hold d1; the answer uses the first and cites d1.

    The old inference (latest assembly whose size and citations fit) picks the second one, whose
    unused chunk (d3) has a different token count from the first one's (d2).
    """
    provider = provider_to(path)
    with ragtrace.rag_pipeline("qa", query="What is BM25?", tracer_provider=provider) as run:
        with ragtrace.retrieve("What is BM25?", top_k=4, tracer_provider=provider) as r:
            r.record(docs("d1", "d2", "d3", "d4"))
        with ragtrace.assemble(tracer_provider=provider) as first:
            first.add(DOCS["d1"])
            first.add(DOCS["d2"])
            prompt = first.render(question="What is BM25?")
        with ragtrace.assemble(tracer_provider=provider) as second:
            second.add(DOCS["d1"])
            second.add(DOCS["d3"])
            second.render(question="What is BM25?")
        with ragtrace.generate(model="m", prompt=prompt, context=first, tracer_provider=provider) as g:
            g.record("BM25 ranks lexically [1].")
    provider.shutdown()
    return run.metrics


def _rows(path: Path) -> tuple[list, str]:
    diagnostics = Diagnostics(io.StringIO())
    rows = [row for trace in TraceReader([path], diagnostics) for row in rows_of(trace)]
    return rows, diagnostics.stream.getvalue()


def _without_context_span_id(source: Path, target: Path) -> None:
    """The same export as an SDK from before the attribute would have written it."""
    out = []
    for line in source.read_text().splitlines():
        document = json.loads(line)
        for resource in document["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    span["attributes"] = [kv for kv in span.get("attributes", []) if kv["key"] != names.RAG_GENERATION_CONTEXT_SPAN_ID]
        out.append(json.dumps(document))
    target.write_text("\n".join(out) + "\n")


def test_the_named_assembly_is_used(tmp_path):
    path = tmp_path / "t.jsonl"
    metrics = _two_assemblies(path)
    assert metrics[names.METRIC_WASTED_CONTEXT_TOKENS] == tokens("d2")  # online: the first assembly
    assert names.RAG_GENERATION_CONTEXT_SPAN_ID in path.read_text()

    (row,), warnings = _rows(path)
    assert row.measurable and row.mismatches == []
    assert row.figures[names.METRIC_WASTED_CONTEXT_TOKENS] == tokens("d2")
    assert row.figures[names.METRIC_IN_CONTEXT] == 2
    assert row.placed_depth == 2  # d1 and d2 reached the prompt, not d3
    assert "differ from the values recorded online" not in warnings


def test_without_the_attribute_the_old_inference_is_the_fallback(tmp_path):
    path, old = tmp_path / "t.jsonl", tmp_path / "old.jsonl"
    _two_assemblies(path)
    _without_context_span_id(path, old)
    assert names.RAG_GENERATION_CONTEXT_SPAN_ID not in old.read_text()

    (row,), warnings = _rows(old)
    # the inference takes the latest assembly that fits (the second): its figures differ from the
    # recorded ones, and the run is reported as not measurable rather than with wrong numbers
    assert row.placed_depth == 3
    assert names.METRIC_WASTED_CONTEXT_TOKENS in row.mismatches
    assert not row.measurable and row.status[0] == "spans_missing"
    assert "differ from the values recorded online" in warnings


def test_a_named_assembly_that_is_missing_leaves_the_context_unknown(tmp_path):
    path, cut = tmp_path / "t.jsonl", tmp_path / "cut.jsonl"
    _two_assemblies(path)
    first_assembly = None
    out = []
    for line in path.read_text().splitlines():
        document = json.loads(line)
        spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
        for span in spans:
            if span["name"] == names.ASSEMBLE_SPAN_NAME and first_assembly is None:
                first_assembly = span["spanId"]
                spans.remove(span)
                break
        if spans:
            out.append(json.dumps(document))
    cut.write_text("\n".join(out) + "\n")

    (row,), _ = _rows(cut)
    # not scored against the other assembly: the recorded figures can't be rebuilt
    assert not row.measurable
    assert names.METRIC_WASTED_CONTEXT_TOKENS not in row.figures
