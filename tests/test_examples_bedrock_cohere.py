"""examples/bedrock_knowledge_base.py and examples/cohere_rag.py, each on the fake it ships
(botocore's Stubber; an httpx MockTransport), run as scripts: what they print, the spans they
export, and the same output without their ragtrace lines.

Bedrock, by hand: retrieve returns 3 passages, all handed to converse, whose answer cites results
0 and 1: retrieved 3, in context 3, cited 2 at [1, 2], recall 2/3, wasted tokens 9 (the shipping
passage: 8 words and a full stop). retrieve_and_generate returns only its 2 cited references:
nothing is measured but the citations, with ``cited_references_only``.
Cohere, by hand: rerank keeps 2 of 3 candidates, both handed to chat, both cited: in context 2,
cited 2 at [1, 2], recall 1 (retrieved = the 2 documents the chat was given).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from integrations.test_instrument import console_spans, example_without, metrics, stages_by_trace, under_opentelemetry_instrument
from test_examples import assert_same_app_without_ragtrace, by_trace, example_env, figures, read_spans, root_of, run, run_ok, stage, without_ragtrace_lines

ENV = {"RAGTRACE_HASH_KEY": "examples"}


def test_bedrock_knowledge_base(tmp_path: Path):
    out = run_ok("bedrock_knowledge_base", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=example_env(**ENV))
    assert out.count("Refunds take 5 business days, or store credit is immediate.") == 2
    traces = list(by_trace(read_spans(tmp_path / "spans.jsonl")).values())
    assert len(traces) == 2
    first, second = sorted(traces, key=lambda t: len(t), reverse=True)
    assert root_of(first)["name"] == "invoke_workflow bedrock"
    got = figures(root_of(first))
    assert (got["retrieved"], got["in_context"], got["cited"], got["cited_positions"], got["wasted_context_tokens"]) == (3, 3, 2, [1, 2], 9)
    assert math.isclose(got["recall_proxy"], 2 / 3) and "status" not in got
    assert stage(first, "retrieve")["attributes"]["rag.retrieval.chunk_ids"] == stage(first, "assemble")["attributes"]["rag.context.chunk_ids"]
    got = figures(root_of(second))
    assert got["status"] == "no_retrieval,no_context,cited_references_only" and "cited" not in got
    generated = stage(second, "generate")["attributes"]
    assert generated["rag.citation.ids"] == stage(first, "generate")["attributes"]["rag.citation.ids"]  # one chunk, one id on both paths
    # "Refunds take 5 business days" is 28 characters, ", or store credit is immediate." 31
    assert (generated["rag.citation.segment_starts"], generated["rag.citation.segment_ends"]) == ([0, 28], [28, 59])


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "chat_stream"])
def test_cohere_rag(tmp_path: Path, stream: bool):
    args = ["--stream"] if stream else []
    out = run_ok("cohere_rag", *args, f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=example_env(**ENV))
    assert "A: Refunds take 5 business days; store credit is immediate.\nCited: kb-refunds, kb-credit\n" in out
    spans = read_spans(tmp_path / "spans.jsonl")
    (rerank,) = [s for s in spans if s["attributes"].get("rag.stage") == "rerank"]
    assert rerank["attributes"]["rag.rerank.output_count"] == 2 and rerank["attributes"]["rag.rerank.search_units"] == 1.0
    (trace,) = [t for t in by_trace(spans).values() if any(s["attributes"].get("rag.stage") == "pipeline" for s in t)]
    generated = stage(trace, "generate")["attributes"]
    assert generated["rag.citation.ids"] == ["kb-refunds", "kb-credit"] and bool(generated.get("gen_ai.request.stream")) is stream
    got = figures(root_of(trace))
    assert (got["retrieved"], got["in_context"], got["cited"], got["cited_positions"], got["recall_proxy"]) == (2, 2, 2, [1, 2], 1.0)


def test_the_examples_without_their_ragtrace_lines_are_the_same_apps(tmp_path: Path):
    assert_same_app_without_ragtrace("cohere_rag", tmp_path, example_env(**ENV))
    plain, ours = without_ragtrace_lines("bedrock_knowledge_base", tmp_path)
    assert ours == ["import ragtrace  # ragtrace", "ragtrace.configure", "ragtrace.instrument"]
    done = run(plain, cwd=tmp_path, env=example_env(**ENV))
    assert done.returncode == 0, done.stderr
    assert done.stdout == run_ok("bedrock_knowledge_base", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=example_env(**ENV))


@pytest.mark.parametrize("disabled", ["bedrock,cohere", ""], ids=["ragtrace-only", "beside-openinference-and-openllmetry"])
def test_opentelemetry_instrument_traces_the_plain_bedrock_example(tmp_path: Path, disabled: str):
    """examples/bedrock_knowledge_base.py with every ragtrace line removed, under
    ``opentelemetry-instrument``: the ``ragtrace_bedrock`` entry point alone gives the same two
    pipelines and figures (``bedrock`` names OpenInference's and OpenLLMetry's entry points: with
    it not disabled, theirs run too)."""
    app = example_without("bedrock_knowledge_base", tmp_path, ("import ragtrace", "ragtrace."))
    assert "ragtrace" not in app.read_text(encoding="utf-8")
    done = under_opentelemetry_instrument(app, disabled=disabled, RAGTRACE_HASH_KEY="examples")
    answers = [line for line in done.stdout.splitlines() if line.startswith("A (")]
    assert [a.split(": ", 1)[1] for a in answers] == ["Refunds take 5 business days, or store credit is immediate."] * 2
    traces = [t for t in stages_by_trace(console_spans(done.stdout)).values() if "pipeline" in t]
    assert len(traces) == 2
    first, second = sorted(traces, key=len, reverse=True)
    got = metrics(first["pipeline"])
    assert (got["retrieved"], got["in_context"], got["cited"], got["cited_positions"]) == (3, 3, 2, [1, 2])
    assert metrics(second["pipeline"])["status"] == "no_retrieval,no_context,cited_references_only"
